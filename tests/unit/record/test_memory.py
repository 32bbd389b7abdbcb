"""SYSTEM/memory.md (issue #34): one section per run that taught something, each lesson
once, secrets masked, the oldest MPs dropped past the size limit."""

from __future__ import annotations

from mp_engine.record import memory
from mp_engine.sync.redact import Redactor


def remember(ws, run_id, lessons, max_bytes=8192, **kw):
    return memory.remember(
        ws, mp_id=f"MP-{run_id}", run_id=run_id, day="2026-11-26", lessons=lessons, max_bytes=max_bytes, **kw
    )


def test_a_run_adds_its_section_once_and_a_known_lesson_is_not_repeated(ws):
    assert remember(ws, "r1", ["`pytest` failed first with `E  x`.", "Asked a; answered b"])
    text = memory.read(ws)
    assert text.startswith(memory.TITLE)
    assert (
        "<!-- run: r1 -->\n## MP-r1 (2026-11-26)\n- `pytest` failed first with `E  x`.\n- Asked a; answered b" in text
    )
    assert not remember(ws, "r1", ["anything"])  # a repeated finalize: nothing written
    assert not remember(ws, "r2", ["`pytest` failed first with `E  x`."])  # known already
    assert remember(ws, "r3", ["Asked a; answered b", "a new   lesson\nover lines"])
    assert memory.read(ws).count("Asked a; answered b") == 1 and "- a new   lesson over lines" in memory.read(ws)


def test_compaction_drops_the_oldest_mps_and_stays_under_the_limit(ws):
    for i in range(40):
        remember(ws, f"r{i:02d}", [f"lesson {i}: " + "x" * 120], max_bytes=2048)
        assert len(memory.read(ws).encode()) <= 2048
    text = memory.read(ws)
    assert "lesson 39" in text and "lesson 0:" not in text
    dropped = int(text.split("<!-- [COMPACTION] ")[1].split()[0])
    assert dropped + text.count("<!-- run: ") == 40  # every section kept or counted as dropped


def test_one_runs_lessons_alone_over_the_limit_keep_the_first_that_fit(ws):
    remember(ws, "big", [f"lesson {i}: " + "y" * 200 for i in range(30)], max_bytes=2048)
    text = memory.read(ws)
    assert len(text.encode()) <= 2048 and "lesson 0:" in text and "lesson 29" not in text


def test_a_secret_in_a_lesson_never_reaches_the_file(ws):
    secret = "s3cr3t-value-0123456789"
    remember(ws, "r1", [f"`deploy` failed first with `denied for {secret}`"], redact=Redactor([secret]))
    assert secret not in memory.read(ws) and "denied for [REDACTED]" in memory.read(ws)


def test_an_orchestrators_file_is_kept_as_the_head(ws):
    memory.path_of(ws).write_text("# Our notes\n\n- use uv, not pip\n")
    remember(ws, "r1", ["a lesson"])
    text = memory.read(ws)
    assert text.startswith("# Our notes\n\n- use uv, not pip\n\n<!-- run: r1 -->")


def test_an_orchestrator_replaces_the_memory_with_an_ordinary_file_block(ws):
    """SYSTEM/memory.md is not an engine-owned path: a `file` block may write it."""
    remember(ws, "r1", ["a lesson that turned out wrong"])
    ws.write_confined("SYSTEM/memory.md", b"# Memory\n\n- only this\n")
    assert memory.read(ws) == "# Memory\n\n- only this\n"
