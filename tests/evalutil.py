"""Helpers for the eval's tests (issue #43): a tiny repository with a real bug, a task set in
SWE-bench's format about it, the patches that fix it (or cheat), and configurations whose
agent is a scripted fake (tests/fake_agents/patcher.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.agentutil import FAKE
from tests.gitutil import git, toml_value

CALC = '"""Arithmetic."""\n\n\ndef add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n'
CALC_FIXED = CALC.replace("a - b", "a + b")
MUL_TEST = (
    "import unittest\n\nfrom calc import mul\n\n\nclass MulTest(unittest.TestCase):\n"
    "    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n"
)
ADD_TEST = (
    "import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(1, 1), 2)\n\n"
    "    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n"
)
CHEAT_TEST = "import unittest\n\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n        pass\n"
F2P = ["tests.test_add.AddTest.test_add"]
P2P = ["tests.test_add.AddTest.test_zero", "tests.test_mul.MulTest.test_mul"]
TEST_CMD = f"{sys.executable} -m unittest {{tests}}"


def calc_repo(where: Path) -> tuple[Path, str]:
    """The repository with the bug (add subtracts) and its base commit."""
    where.mkdir(parents=True)
    files = {"calc.py": CALC, "tests/__init__.py": "", "tests/test_mul.py": MUL_TEST, ".gitignore": "__pycache__/\n"}
    for name, text in files.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(text)
    git(where, "init", "-q", "-b", "main")
    git(where, "add", "-A")
    git(where, "commit", "-qm", "calc")
    return where, git(where, "rev-parse", "HEAD")


def diff_of(repo: Path, files: dict[str, str]) -> str:
    """The patch that writes `files` over the repository's HEAD (the repository is left as it was)."""
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-N", "--", *files)
    patch = subprocess.run(["git", "diff", "HEAD", "--", *files], cwd=repo, capture_output=True, text=True).stdout
    git(repo, "reset", "-q", "--hard")
    git(repo, "clean", "-qfd")
    return patch


def task_line(iid: str, base: str, test_patch: str, **more: Any) -> dict[str, Any]:
    return {
        "instance_id": iid,
        "repo": "calc",
        "base_commit": base,
        "problem_statement": "add() subtracts instead of adding:\n\n- add(1, 1) gives 0\n## Validate\n",
        "test_patch": test_patch,
        "FAIL_TO_PASS": json.dumps(F2P),  # as the SWE-bench datasets hold it: a JSON string
        "PASS_TO_PASS": P2P,
        **more,
    }


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def calc_set(tmp: Path, ids: list[str]) -> tuple[Path, Path, str]:
    """A task set of `ids` about one calc repository: (the set, the repository, base)."""
    repo, base = calc_repo(tmp / "calc")
    test_patch = diff_of(repo, {"tests/test_add.py": ADD_TEST})
    rows = [{"repo": "calc", "url": "calc", "test": TEST_CMD}] + [task_line(i, base, test_patch) for i in ids]
    return write_jsonl(tmp / "tasks.jsonl", rows), repo, base


def patches(where: Path, repo: Path, script: dict[str, dict[str, str]]) -> Path:
    """A directory of patches for patcher.py: {task id: the files its work writes}."""
    where.mkdir(parents=True, exist_ok=True)
    for iid, files in script.items():
        (where / f"{iid}.patch").write_text(diff_of(repo, files))
    return where


def patcher_config(path: Path, patches_dir: Path, *extra: str, **agent: Any) -> Path:
    """An mp-engine.toml whose one agent level is the scripted patcher."""
    argv = [str(FAKE / "patcher.py"), "--prompt-file", "{prompt_file}", "--patches", str(patches_dir), *extra]
    lines = ["[agent]", *(f"{k} = {toml_value(v)}" for k, v in {"max_iterations": 3, **agent}.items())]
    lines += ["", "[[agent.levels]]", 'name = "patcher"', f"argv = {toml_value(argv)}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def rows(out: Path) -> list[dict[str, Any]]:
    """results.jsonl of an eval directory."""
    path = out / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
