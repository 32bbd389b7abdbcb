"""The scene of the pull-request e2e tests (issue #41): the GitHub double, a real git remote
over HTTP behind the token, a workspace configured for `[repos.app]`, and a CI of the
test's own that judges each pushed commit."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from mp_engine.core.workspace import Workspace
from tests.agentutil import configure, level
from tests.conftest import result_field
from tests.forge import openapi
from tests.forge.githttp import GitHttp
from tests.forge.github_double import GitHubDouble
from tests.gitutil import toml_value

SLUG = "me/app"
BRANCH = "mp/MP-41.1"
MP = """# MP-41.1 A greeting in the app
Executor: agent
Repo: app

Write "hello" to `hello.txt`.

## Validate

```bash
grep -qx hello hello.txt
```
"""
# What the test's CI says of a commit without ci.txt: its log carries the fix, in words the
# fake agents carry out, so the next round's prompt (which quotes it) makes CI pass.
RED = 'collecting ...\nFAILED tests/test_ci.py::test_marker - ci.txt is missing\nTo fix: Write "ok" to `ci.txt`.\n'


class Ci:
    """CI on the pull request's pushes: each new tip of the work branch gets one check run,
    red while the commit has no ci.txt, green once it has (or always red: `fixable=False`)."""

    def __init__(
        self, double: GitHubDouble, bare: Path, branch: str = BRANCH, *, fixable: bool = True, green: bool = False
    ):
        """`green`: every push passes."""
        self.double, self.bare, self.branch, self.fixable, self.green = double, bare, branch, fixable, green
        self.judged: list[tuple[str, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def tip(self) -> str | None:
        out = subprocess.run(
            ["git", "-C", str(self.bare), "rev-parse", "-q", "--verify", f"refs/heads/{self.branch}"],
            capture_output=True,
            text=True,
        )
        return out.stdout.strip() or None

    def _watch(self) -> None:
        while not self.stop.wait(0.1):
            sha = self.tip()
            if sha is None or any(s == sha for s, _ in self.judged):
                continue
            has = subprocess.run(["git", "-C", str(self.bare), "cat-file", "-e", f"{sha}:ci.txt"]).returncode == 0
            conclusion = "success" if (has and self.fixable) or self.green else "failure"
            run = self.double.repo(SLUG).add_check(sha, "tests", conclusion=conclusion, summary=f"tests {conclusion}")
            if conclusion == "failure":
                self.double.logs[run.id] = RED
            self.judged.append((sha, conclusion))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


@pytest.fixture
def forge(tmp_path):
    """(token, the double, the git server, the bare repository `me/app`)."""
    openapi.openapi()  # GitHub's description, from npm (skips with the reason when npm is missing)
    token = "github_pat_" + __import__("secrets").token_hex(40)
    double = GitHubDouble(token)
    double.repo(SLUG)
    (tmp_path / "served").mkdir()
    served = GitHttp(tmp_path / "served", token)
    bare = served.bare("me/app")
    double.remotes[SLUG] = str(bare)
    yield token, double, served, bare
    served.close()
    double.close()
    assert double.violations == [], "requests or answers GitHub's description does not allow"


def files(root: Path) -> list[Path]:
    """Every file under `root` the run may have written (the channel's own .git aside)."""
    return [p for p in root.rglob("*") if p.is_file() and ".git" not in p.relative_to(root).parts[:1]]


def ended(ws: Workspace, d: Any) -> bool:
    """The MP has its result; a daemon that stopped on its own fails the test at once."""
    assert d.proc.poll() is None, d.output()
    return result_field(ws, "Status") in ("COMPLETED", "ERROR")


def setup(ws: Workspace, tmp_path: Path, forge: tuple, *levels: dict[str, Any], **repo: Any) -> tuple[dict, Path]:
    """`[repos.app]` on the scene's remote and double, with `repo`'s keys over the defaults;
    the agent levels (by default one honest agent logging its calls to the returned path)."""
    token, double, served, bare = forge
    log = tmp_path / "calls.jsonl"
    configure(ws, list(levels) or [level("fast", "good.py", "--log", str(log))])
    table = {
        "url": f"{served.url}/me/app.git",
        "api_url": double.url,
        "forge": "github",
        "token_env": "APP_TOKEN",
        "land": "pull_request",
        "ci_poll": 0.2,
        **repo,
    }
    with ws.config_file.open("a") as f:
        f.write("\n[repos.app]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in table.items()))
    return {"APP_TOKEN": token}, log


def git(bare: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(bare), *args], check=True, capture_output=True, text=True).stdout.strip()
