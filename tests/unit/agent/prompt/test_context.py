"""Context compilation within a token budget: the task's files, then the map; what does not
fit is cut or left out, saying so."""

from __future__ import annotations

from mp_engine.agent.prompt.context import compile_context, named_files, tokens
from mp_engine.agent.prompt.repomap import RepoMap
from tests.gitutil import git


def repo(tmp_path, files: int = 3):
    root = tmp_path / "r"
    (root / "src").mkdir(parents=True)
    (root / "src" / "config.py").write_text("SECRET_NUMBER = 41\n\ndef load(path: str) -> dict:\n    return {}\n")
    for i in range(files):
        (root / "src" / f"mod{i}.py").write_text(f"def f{i}(a, b):\n    return a\n")
    git(root, "init", "-q")
    return root


def test_tokens_are_four_bytes_each_rounded_up():
    assert tokens("") == 0 and tokens("abcd") == 1 and tokens("abcde") == 2 and tokens("é" * 2) == 1


def test_named_files_are_the_worktrees_files_the_task_names(tmp_path):
    root = repo(tmp_path)
    known = {"src/config.py", "src/mod0.py"}
    text = "Fix `src/config.py` (see ./src/mod0.py and src/missing.py, not config.py alone)."
    assert named_files(text, root, known) == ["src/config.py", "src/mod0.py"]


def test_the_map_then_the_named_files_within_the_budget(tmp_path):
    root = repo(tmp_path)
    text = compile_context("Change `src/config.py`.", RepoMap(root), 2000)
    assert "## Files the MP names" in text and "SECRET_NUMBER = 41" in text
    assert "## Repository map" in text and "    def load(path: str) -> dict" in text and "    def f2(a, b)" in text
    assert text.index("## Repository map") < text.index("## Files the MP names")
    assert tokens(text) <= 2000


def test_a_frozen_map_stays_as_the_run_found_it_and_the_named_files_are_current(tmp_path):
    """Issue #34: the map is the same bytes in every prompt of a run (a prefix cache serves
    it) while the named files show what they hold now; the map's share does not depend on
    whether a named file exists yet."""
    root = repo(tmp_path)
    frozen: dict[int, str] = {}
    first = compile_context("Write `out/new.py`.", RepoMap(root), 2000, frozen)
    assert "; as this run found it)" in first and "## Files the MP names" not in first  # out/new.py: not yet
    (root / "out").mkdir()
    (root / "out" / "new.py").write_text("def added_by_the_agent(): pass\n")
    second = compile_context("Write `out/new.py`.", RepoMap(root), 2000, frozen)
    assert second.startswith(first) and "added_by_the_agent" in second[len(first) :]
    assert "out/new.py" in compile_context("Write `out/new.py`.", RepoMap(root), 2000)  # unfrozen: current


def test_a_small_budget_parses_only_what_fits_then_lists_paths_then_counts(tmp_path):
    root = repo(tmp_path, files=400)
    (root / "lib").mkdir()
    (root / "lib" / "near.py").write_text("def beside_the_task(x): pass\n")
    (root / "lib" / "task.py").write_text("x = 1\n")
    m = RepoMap(root)
    text = compile_context("Change `lib/task.py`.", m, 1500)
    body = text[text.index("## Repository map") :]
    assert body.index("lib/near.py\n    def beside_the_task(x)") < body.index("src/config.py")  # beside the task first
    assert "    def f1(a, b)" in body and "more files (left out: the token budget)" in body
    assert tokens(text) <= 1500
    assert m.parsed < 403 // 2  # only the files whose signatures fit were parsed, not all 403
    tiny = compile_context("Nothing named.", m, 60)
    assert tiny == "" or tokens(tiny) <= 60
    assert compile_context("Change `src/config.py`.", m, 0) == ""


def test_a_file_over_its_share_is_cut_saying_so(tmp_path):
    root = repo(tmp_path)
    (root / "src" / "big.py").write_text("x = 1\n" * 5000)
    text = compile_context("Change `src/big.py`.", RepoMap(root), 1000)
    assert "[... cut: over the token budget]" in text and tokens(text) <= 1000


def test_a_binary_file_is_named_but_not_shown(tmp_path):
    root = repo(tmp_path)
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)) * 40)
    text = compile_context("Replace `logo.png`.", RepoMap(root), 3000)
    assert "logo.png: (binary, not shown)" in text and "IHDR" not in text
