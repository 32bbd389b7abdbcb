"""One MP through `Engine.tick()` with a real CLI as the only agent level (issue #16):
what every conformance row does, whatever the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mp_engine.commands.init import add_agents
from mp_engine.config.load import load_config
from mp_engine.core.workspace import Workspace
from mp_engine.pipeline.context import TickResult
from mp_engine.pipeline.engine import Engine
from tests.agentutil import ONE, configure, only_run, records
from tests.conftest import drop
from tests.gitutil import git, toml_value

# A 200 KB MP: over what one argv argument may carry (the prompt must go on stdin or in a file).
BULKY = ONE.replace("Keep it short.", "Keep it short.\n\n" + ("Background paragraph. " * 10_000))


def run_mp(ws: Workspace, level: dict[str, Any], mp: str, *, git_repo: bool = True, **opts: Any) -> TickResult:
    """Configure `level` (then the `[agent]` settings `opts`), drop `mp`, run one tick."""
    configure(ws, [level], git_repo=git_repo, **{"transient_backoff": 0.0, **opts})
    return tick(ws, mp)


def tick(ws: Workspace, mp: str) -> TickResult:
    """Drop `mp` into the configured workspace and run one tick of the engine."""
    engine = Engine(ws, load_config(ws.root))
    engine.start(daemon=False)
    try:
        drop(ws, mp)
        return engine.tick()
    finally:
        engine.shutdown()


def first_call(ws: Workspace) -> dict[str, Any]:
    """The classified agent call of the run's first iteration."""
    recs = records(only_run(ws))
    assert recs, "no iteration was recorded"
    return recs[0]["call"]


def needs_sandbox() -> None:
    """Skip a row that runs with `sandbox = "os"` where bubblewrap cannot run (it says why)."""
    import pytest

    from mp_engine.execute.sandbox import problem

    if problem() is not None:
        pytest.skip(f"the sandbox cannot run here: {problem()}")


def assert_sandboxed_exact(ws: Workspace, result: TickResult, api_url: str, *, configured: bool = False) -> None:
    """A row run with `[agent] sandbox = "os"` (issue #33): the work landed EXACT, and the
    call's evidence says it was sandboxed with the fake model server the one host it reached
    (`configured`: one of the hosts it may reach, besides the preset's own)."""
    from tests.conftest import result_field

    assert result.action == "completed", ws.result_file.read_text()
    assert result_field(ws, "Certificate") == "EXACT" and (ws.root / "out" / "a.txt").read_text() == "hello\n"
    rules = json.loads((only_run(ws).dir / records(only_run(ws))[0]["evidence"] / "sandbox.json").read_text())
    host = urlsplit(api_url).netloc
    assert host in rules["network"] if configured else rules["network"] == [host], rules
    assert str(ws.root) in rules["hidden"]


def init_agent(ws: Workspace, name: str, exe: Path, *, level: dict[str, Any] | None = None, **agent: Any) -> None:
    """Configure the workspace as `mp-engine init --agent NAME` does (the preset, then a hard
    gate; `sandbox = "os"` where bubblewrap works), its CLI by path; `level` and `agent` set
    keys of the level and of `[agent]` (to bound a row's time). Then make it a git repository
    with a first commit, as the operator's is (without a git identity of its own)."""
    add_agents(ws.config_file, [name], lambda line: None)
    text = ws.config_file.read_text()
    at = re.search(r"^\[\[agent\.levels\]\]", text, re.M)  # the first written out, not the template's examples
    assert at is not None, text
    head, sep, levels = text[: at.start()], at.group(0), text[at.end() :]
    levels = levels.replace(f'argv = ["{name}",', f"argv = [{toml_value(str(exe))},", 1)
    for key, value in (level or {}).items():
        levels, n = re.subn(rf"^{key} = .*$", f"{key} = {toml_value(value)}", levels, count=1, flags=re.M)
        if not n:
            levels = levels.replace("\n", f"\n{key} = {toml_value(value)}\n", 1)
    for key, value in agent.items():
        head, n = re.subn(rf"^{key} = .*$", f"{key} = {toml_value(value)}", head, count=1, flags=re.M)
        assert n == 1, f"[agent] has no {key}"
    ws.config_file.write_text(head + sep + levels)
    who = ["-c", "user.name=operator", "-c", "user.email=operator@example.invalid"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], [*who, "commit", "-qm", "workspace"]):
        git(ws.root, *args)
