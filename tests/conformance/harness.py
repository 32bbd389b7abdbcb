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


# The reviewer (issue #42): a real CLI as `[agent.reviewer]`, a fake worker (tests/fake_agents).
REVIEW_CHANGE = 'Append "hi again" to `out/a.txt`.'


def reviewing(req: dict[str, Any], count: int) -> Any:
    """As the reviewer: request one change of out/a.txt in round 1, approve in round 2, each
    under the nonce of the review's own prompt."""
    from tests.conformance import fakemodel as fm

    said = fm.user_text(req)
    nonce = re.search(r'^<review nonce="([0-9a-f]+)">', said, re.M)
    assert nonce, "the reviewer's prompt shows its answer block"
    if "## Your review in round 1" in said:
        return fm.text(f'Better now.\n<review nonce="{nonce.group(1)}">\nVERDICT: approve\n</review>')
    body = f"VERDICT: changes\n- out/a.txt: {REVIEW_CHANGE}"
    return fm.text(f'One thing.\n<review nonce="{nonce.group(1)}">\n{body}\n</review>')


def fake_worker() -> dict[str, Any]:
    """The worker level of a reviewer row: the honest fake, which also makes the changes a
    reviewer requests."""
    from tests.agentutil import level

    return level("good", "good.py", "--obey-review")


def assert_reviewed(ws: Workspace, result: TickResult, api: Any) -> None:
    """The reviewer (a real CLI, read-only in the sandbox) asked for a change in round 1,
    which went back to MT-001, and approved round 2: EXACT, with the change landed."""
    from tests.conformance import fakemodel as fm
    from tests.conftest import result_field

    assert result.action == "completed", ws.result_file.read_text()
    assert result_field(ws, "Certificate") == "EXACT"
    assert (ws.root / "out" / "a.txt").read_text() == "hello\nhi again\n"
    review = json.loads((ws.system_dir / "RESULT_last.json").read_text())["review"]
    assert [r["verdict"] for r in review["reviews"]] == ["changes", "approve"] and review["rounds"] == 1
    assert review["reviews"][0]["items"] == [{"target": "out/a.txt", "mt": "MT-001", "change": REVIEW_CHANGE}]
    prompts = [fm.user_text(r) for r in api.requests if "# Review for mp-engine" in fm.user_text(r)]
    assert prompts and "+hello" in prompts[0] and "grep -qx hello out/a.txt" in prompts[0]
    run = only_run(ws)
    boxed = json.loads((run.dir / "agent" / "REVIEW-1" / "iter-001" / "sandbox.json").read_text())
    assert boxed["read_only"] is True and boxed["network"] == [urlsplit(api.url).netloc], boxed
