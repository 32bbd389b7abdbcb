"""The files that judge the work, protected from the agent (mp_engine/agent/judge/protected.py,
issue #42): found from the base commit, a change seen without git, the base's copy put
back; and through `Engine.tick()`, an agent that rewrites the check it is judged by, or
CI's workflow, never gets a COMPLETED result from that edit."""

from __future__ import annotations

import json
from pathlib import Path

from mp_engine.agent.judge.protected import Protected, glob_re, static_dir
from mp_engine.inbox.mpfile import parse
from tests.agentutil import level, only_run, records
from tests.conftest import drop, events, result_field
from tests.gitutil import git

CHECK = 'import sys\nsys.exit(0 if open("out/a.txt").read() == "hello\\n" else 1)\n'
WORKFLOW = "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - run: python3 tests/check_a.py\n"
MP = """# MP-42.3 Judged by a script of the repository
Executor: agent
{headers}
Write "hello" to `out/a.txt`.

## Validate

```bash
python3 tests/check_a.py
```
"""


def mp(headers: str = "") -> str:
    return MP.format(headers=headers + "\n" if headers else "")


def repo(root: Path) -> str:
    """A repository with a check script, a conftest, a CI workflow and other files; its HEAD."""
    files = {
        "tests/check_a.py": CHECK,
        "tests/test_b.py": "def test_b():\n    pass\n",
        ".github/workflows/ci.yml": WORKFLOW,
        "src/app.py": "x = 1\n",
        "poetry.lock": "lock\n",
        "docs/guide.md": "guide\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "base"]):
        git(root, *args)
    return git(root, "rev-parse", "HEAD")


def protected(root: Path, headers: str = "", globs=()) -> Protected:
    base = repo(root)
    text = mp(headers).replace("python3 tests/check_a.py", "python3 tests/check_a.py && pytest -q tests")
    return Protected.at(root, base, parse(text.encode()), globs)


def test_the_checks_files_ci_and_the_operator_s_globs_are_protected(tmp_path):
    p = protected(tmp_path, globs=("*.lock", "docs/"))
    assert {"tests/check_a.py", "tests/test_b.py", ".github/workflows/ci.yml", "poetry.lock", "docs/guide.md"} <= set(
        p.files
    )
    assert "src/app.py" not in p.files
    assert p.files["tests/conftest.py"] == "" and p.files["conftest.py"] == ""  # absent, and must stay so
    assert p.touched() == []


def test_a_change_an_addition_or_a_removal_is_seen_and_the_base_copy_comes_back(tmp_path):
    p = protected(tmp_path, globs=("*.lock",))
    (tmp_path / "tests/check_a.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / ".github/workflows/release.yml").write_text("on: push\n")  # a new workflow
    (tmp_path / "tests/conftest.py").write_text("collect_ignore = ['test_b.py']\n")
    (tmp_path / "poetry.lock").unlink()
    (tmp_path / "src/app.py").write_text("x = 2\n")  # the work: not protected
    (tmp_path / "new.lock").write_text("new\n")
    touched = p.touched()
    assert touched == [
        ".github/workflows/release.yml",
        "new.lock",
        "poetry.lock",
        "tests/check_a.py",
        "tests/conftest.py",
    ]
    git(tmp_path, "add", "-A")  # even staged, the base's copy comes back
    p.restore(touched)
    assert (tmp_path / "tests/check_a.py").read_text() == CHECK and (tmp_path / "poetry.lock").exists()
    assert not (tmp_path / ".github/workflows/release.yml").exists() and not (tmp_path / "tests/conftest.py").exists()
    assert p.touched() == [] and (tmp_path / "src/app.py").read_text() == "x = 2\n"
    assert git(tmp_path, "status", "--porcelain") == "M  src/app.py"


def test_a_touch_that_keeps_the_content_is_no_change(tmp_path):
    p = protected(tmp_path)
    path = tmp_path / "tests/check_a.py"
    path.write_text(path.read_text())  # a new mtime, the same bytes
    assert p.touched() == []


def test_allow_changes_lets_the_agent_change_what_it_names(tmp_path):
    p = protected(tmp_path, headers="Allow-Changes: tests/check_a.py, .github/workflows/*.yml")
    (tmp_path / "tests/check_a.py").write_text("pass\n")
    (tmp_path / ".github/workflows/ci.yml").write_text("on: pull_request\n")
    (tmp_path / "tests/test_b.py").write_text("pass\n")
    assert p.touched() == ["tests/test_b.py"]


def test_globs():
    assert glob_re("*.lock").match("a/b/c.lock") and not glob_re("/x/*.lock").match("c.lock")
    assert glob_re("tests/**").match("tests/a/b.py") and glob_re("docs/").match("docs/a/b.md")
    assert glob_re("src/*.py").match("src/a.py") and not glob_re("src/*.py").match("src/a/b.py")
    assert glob_re("src/**/x.py").match("src/x.py") and glob_re("src/**/x.py").match("src/a/b/x.py")
    assert (
        static_dir("tests/unit/**/*.py") == "tests/unit"
        and static_dir("*.lock") == ""
        and static_dir("docs/") == "docs"
    )


# -- through Engine.tick() ----------------------------------------------------------------


def start(engine_for, ws, *levels, **opts):
    repo_files(ws.root)
    return engine_for(list(levels), **opts)


def repo_files(root: Path) -> None:
    for rel, text in {"tests/check_a.py": CHECK, ".github/workflows/ci.yml": WORKFLOW}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_an_agent_that_rewrites_the_check_it_is_judged_by_never_completes(engine_for, ws):
    cheat = level("cheater", "cheater.py", "--rewrite", "tests/check_a.py", "--content", "import sys\nsys.exit(0)\n")
    engine = start(engine_for, ws, cheat, max_iterations=3, max_no_progress=10, max_same_error=10)
    drop(ws, mp())
    assert engine.tick().action == "error", ws.result_file.read_text()
    assert result_field(ws, "Status") == "ERROR" and result_field(ws, "Certificate") == "TIMEOUT"
    recs = records(only_run(ws))
    assert len(recs) == 3
    for rec in recs:
        assert rec["claimed"] and not rec["gate"] and rec["protected"] == ["tests/check_a.py"]
        assert rec["failing"] == ["check-001", "protected_path"] and rec["residual"] == 2
    # The check ran on the base's copy every time, and the branch keeps it.
    assert git(ws.root, "show", "mp/MP-42.3:tests/check_a.py") + "\n" == CHECK
    restored = [e for e in events(ws) if e["event"] == "protected_path_restored"]
    assert [e["paths"] for e in restored] == [["tests/check_a.py"]] * 3
    # The next prompt says what happened and why.
    second = (only_run(ws).dir / recs[1]["evidence"] / "prompt.md").read_text()
    assert "protected_path failed" in second and "You changed tests/check_a.py, which judge the work" in second
    result = json.loads((ws.system_dir / "RESULT_last.json").read_text())
    assert result["protected"]["paths"] == ["tests/check_a.py"] and len(result["protected"]["iterations"]) == 3
    assert "## Protected files" in ws.result_file.read_text()


def test_an_agent_that_rewrites_ci_fails_that_iteration_and_its_honest_next_one_lands_without_it(engine_for, ws):
    cheat = level("cheater", "cheater.py", "--rewrite", ".github/workflows/ci.yml", "--honest-from", "2")
    engine = start(engine_for, ws, cheat, max_iterations=3)
    drop(ws, mp())
    assert engine.tick().action == "completed", ws.result_file.read_text()
    first, second = records(only_run(ws))
    assert first["protected"] == [".github/workflows/ci.yml"] and not first["gate"]
    assert second["gate"] and "protected" not in second
    assert (ws.root / ".github/workflows/ci.yml").read_text() == WORKFLOW  # landed without the edit
    assert (ws.root / "out/a.txt").read_text() == "hello\n"


def test_allow_changes_opens_what_it_names(engine_for, ws):
    cheat = level("cheater", "cheater.py", "--rewrite", "tests/check_a.py", "--content", "import sys\nsys.exit(0)\n")
    engine = start(engine_for, ws, cheat, max_iterations=2)
    drop(ws, mp("Allow-Changes: tests/check_a.py"))
    assert engine.tick().action == "completed", ws.result_file.read_text()
    assert (ws.root / "tests/check_a.py").read_text() == "import sys\nsys.exit(0)\n"


def test_line_endings_git_would_store_the_same_are_no_change(tmp_path):
    """With `core.autocrlf` (or .gitattributes), bytes that differ from the blob may be the
    same file as git stores it: git is asked, and only then."""
    p = protected(tmp_path)
    assert not p.filters
    git(tmp_path, "config", "core.autocrlf", "true")
    p = Protected.at(tmp_path, git(tmp_path, "rev-parse", "HEAD"), parse(mp().encode()))
    assert p.filters
    (tmp_path / "tests/check_a.py").write_text(CHECK.replace("\n", "\r\n"))
    assert p.touched() == []
