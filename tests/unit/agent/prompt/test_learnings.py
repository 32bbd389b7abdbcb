"""The learnings file: one entry per iteration, compaction with a marker."""

from __future__ import annotations

from mp_engine.agent.prompt import learnings


def entry(n: int, size: int = 10) -> str:
    return f"### MT-001 iteration {n}: residual {n}\n- Tried: " + "x" * size


def test_entries_are_appended_and_a_retried_iteration_replaces_its_entry(tmp_path):
    path = tmp_path / "learnings.md"
    learnings.append(path, "MT-001_iter-001", entry(1), title="# Learnings", max_bytes=10_000)
    learnings.append(path, "MT-001_iter-002", entry(2), title="# Learnings", max_bytes=10_000)
    learnings.append(path, "MT-001_iter-002", "### MT-001 iteration 2: retried", title="# Learnings", max_bytes=10_000)
    text = path.read_text()
    assert text.startswith("# Learnings\n")
    assert text.count("<!-- entry: MT-001_iter-002 -->") == 1 and "retried" in text and "residual 2" not in text
    assert "residual 1" in text


def test_a_new_entry_is_appended_in_place_with_the_bytes_a_rewrite_would_leave(tmp_path):
    path = tmp_path / "learnings.md"
    learnings.append(path, "MT-001_iter-001", entry(1), title="# Learnings", max_bytes=10_000)
    inode = path.stat().st_ino
    learnings.append(path, "MT-001_iter-002", entry(2) + "\n\n", title="# Learnings", max_bytes=10_000)
    assert path.stat().st_ino == inode  # appended, not rewritten
    expected = "# Learnings\n"
    for n in (1, 2):
        expected += f"\n<!-- entry: MT-001_iter-00{n} -->\n{entry(n)}\n"
    assert path.read_text() == expected


def test_compaction_keeps_the_latest_entries_whole_and_marks_what_it_did(tmp_path):
    path = tmp_path / "learnings.md"
    compacted = [
        learnings.append(path, f"MT-001_iter-{n:03d}", entry(n, 300), title="# Learnings", max_bytes=1500)
        for n in range(1, 8)
    ]
    assert compacted[0] is False and any(compacted)
    text = path.read_text()
    assert len(text.encode()) < 2200
    assert "## Compacted earlier iterations" in text and "<!-- [COMPACTION] " in text
    marker = next(line for line in text.splitlines() if line.startswith("<!-- [COMPACTION]"))
    assert "distilled to one line each" in marker and "lines ->" in marker
    for n in (1, 2, 3, 4):
        assert f"- MT-001 iteration {n}: residual {n}" in text  # one-liners keep the heading
    for n in (5, 6, 7):
        assert f"<!-- entry: MT-001_iter-{n:03d} -->" in text  # the latest stay whole
    assert "<!-- entry: MT-001_iter-001 -->" not in text


def test_split_parts_the_earlier_micro_tasks_from_this_ones_entries():
    from mp_engine.agent.prompt.learnings import split

    text = "# L\n\n<!-- entry: MT-001_iter-001 -->\na\n\n<!-- entry: MT-002_iter-001 -->\nb\n"
    assert split(text, "MT-002") == (
        "# L\n\n<!-- entry: MT-001_iter-001 -->\na\n\n",
        "<!-- entry: MT-002_iter-001 -->\nb\n",
    )
    assert split(text, "MT-003") == (text, "")  # no entry yet: everything is earlier
    assert split(text, "MT-00") == (text, "")  # an id is matched whole, not as a prefix


def test_without_title_keeps_the_compacted_lines_and_the_entries():
    assert (
        learnings.without_title("") == ""
        and learnings.without_title("# Learnings of MP-1.1\n\nOne entry per iteration.\n") == ""
    )
    text = "# Learnings\n\n<!-- entry: MT-001_iter-001 -->\ntried x\n"
    assert learnings.without_title(text) == "<!-- entry: MT-001_iter-001 -->\ntried x"
    compacted = "# Learnings\n\n## Compacted earlier iterations\n\n- a\n\n<!-- entry: MT-001_iter-004 -->\ny\n"
    assert learnings.without_title(compacted).startswith("## Compacted earlier iterations\n\n- a")
