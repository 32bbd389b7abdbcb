"""A configured repository for the agent run's tests (issue #41): a bare git repository on
disk with one commit on `main`, `[repos.app]` naming it, and the engine's forge for it
swapped for the simplest one (forge/memory.py), whose checks a test sets."""

from __future__ import annotations

import functools
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from mp_engine.config.load import load_config
from mp_engine.core.workspace import Workspace
from mp_engine.forge.base import Check, CheckState
from mp_engine.forge.memory import MemoryForge
from mp_engine.pipeline.context import Action, TickResult
from mp_engine.pipeline.engine import Engine
from tests.agentutil import configure, level
from tests.conftest import wait_for
from tests.gitutil import toml_value

MP = """# MP-41.2 A greeting
Executor: agent
Repo: app

Write "hello" to `hello.txt`.

## Validate

```bash
grep -qx hello hello.txt
```
"""
BRANCH = "mp/MP-41.2"
TOKEN = "github_pat_" + "x" * 40  # [repos.app] token_env's value


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True).stdout.strip()


def remote(tmp_path: Path) -> Path:
    """`me/app.git`, bare, with one commit on main."""
    bare = tmp_path / "served" / "me" / "app.git"
    bare.parent.mkdir(parents=True)
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(bare), str(seed))
    (seed / "README.md").write_text("# app\n")
    git(seed, "add", "README.md")
    git(seed, "-c", "user.name=s", "-c", "user.email=s@example.com", "commit", "-q", "-m", "first")
    git(seed, "push", "-q", "origin", "HEAD:main")
    return bare


class Counting(MemoryForge):
    """The memory forge, counting what it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def ci(self, sha: str):  # type: ignore[no-untyped-def]
        self.asked.append(f"ci {sha}")
        return super().ci(sha)

    def pass_(self, sha: str, state: CheckState = CheckState.PASSED, name: str = "tests") -> None:
        word = {"passed": "success", "failed": "failure", "pending": "in_progress"}[state.value]
        self.checks[sha] = (Check(name, "check_run", state, word, "https://ci/1", f"{name} {word}"),)


def engine(ws: Workspace, tmp_path: Path, monkeypatch, *levels: dict[str, Any], forge: Any = None, **repo: Any):
    """(a started engine with `[repos.app]` on a fresh remote, its forge, the remote).
    `forge`: the forge the engine uses (default: the memory forge, counting)."""
    bare = remote(tmp_path)
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    monkeypatch.setenv("APP_TOKEN", TOKEN)
    configure(ws, list(levels) or [level("good", "good.py", "--log", str(tmp_path / "calls.jsonl"))])
    table = {
        "url": f"file://{bare}",
        "api_url": "http://127.0.0.1:9",
        "forge": "github",
        "token_env": "APP_TOKEN",
        "land": "pull_request",
        "ci_poll": 0.01,
        **repo,
    }
    with ws.config_file.open("a") as f:
        f.write("\n[repos.app]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in table.items()))
    eng = Engine(ws, load_config(ws.root))
    forge = Counting() if forge is None else forge
    eng.repos["app"] = replace(eng.repos["app"], forge=forge)  # the executor shares this dict
    eng.start(daemon=False)
    return eng, forge, bare


def passed(when: float) -> bool:
    """The monotonic time `when` (a run's resume time) has come."""
    return time.monotonic() >= when


def until_done(eng: Engine, forge: Counting, bare: Path, *, green=True, limit: float = 60) -> TickResult:
    """Tick until the run ends, CI judging each new tip of the work branch (green, or red)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        tip = subprocess.run(
            ["git", "-C", str(bare), "rev-parse", "-q", "--verify", f"refs/heads/{BRANCH}"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        if tip and tip not in forge.checks:
            forge.pass_(tip, CheckState.PASSED if green else CheckState.FAILED)
        res = eng.tick()
        if res.action is Action.WAITING and res.wait_until is not None:
            wait_for(functools.partial(passed, res.wait_until), timeout=10, interval=0.005)
        elif res.action not in (Action.WAITING, Action.IDLE, Action.BUSY):
            return res
    raise AssertionError("the run did not end")
