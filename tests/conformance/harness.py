"""One MP through `Engine.tick()` with a real CLI as the only agent level (issue #16):
what every conformance row does, whatever the CLI."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from mp_engine.config.load import load_config
from mp_engine.core.workspace import Workspace
from mp_engine.pipeline.context import TickResult
from mp_engine.pipeline.engine import Engine
from tests.agentutil import ONE, configure, only_run, records
from tests.conftest import drop

# A 200 KB MP: over what one argv argument may carry (the prompt must go on stdin or in a file).
BULKY = ONE.replace("Keep it short.", "Keep it short.\n\n" + ("Background paragraph. " * 10_000))


def run_mp(ws: Workspace, level: dict[str, Any], mp: str, *, git_repo: bool = True, **opts: Any) -> TickResult:
    """Configure `level` (then the `[agent]` settings `opts`), drop `mp`, run one tick."""
    configure(ws, [level], git_repo=git_repo, **{"transient_backoff": 0.0, **opts})
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


def assert_sandboxed_exact(ws: Workspace, result: TickResult, api_url: str) -> None:
    """A row run with `[agent] sandbox = "os"` (issue #33): the work landed EXACT, and the
    call's evidence says it was sandboxed with the fake model server the one host it reached."""
    from tests.conftest import result_field

    assert result.action == "completed", ws.result_file.read_text()
    assert result_field(ws, "Certificate") == "EXACT" and (ws.root / "out" / "a.txt").read_text() == "hello\n"
    rules = json.loads((only_run(ws).dir / records(only_run(ws))[0]["evidence"] / "sandbox.json").read_text())
    assert rules["network"] == [urlsplit(api_url).netloc] and str(ws.root) in rules["hidden"]
