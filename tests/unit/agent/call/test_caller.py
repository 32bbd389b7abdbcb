"""Calling an agent (mp_engine/agent/call/caller.py) with fake agent CLIs: one call per
iteration, a finished call reused after a crash, transient outages retried, and what a
call that cannot work says."""

from __future__ import annotations

import json

import pytest

from mp_engine.agent.call.caller import Caller, why_fatal
from mp_engine.agent.call.invoke import Call
from mp_engine.agent.evidence import IterationEvidence
from mp_engine.config.agent import AgentLevel
from mp_engine.execute.sandbox import problem
from tests.agentutil import ONE, agent_context, calls, level, run_scope
from tests.netutil import TcpServer


def caller_for(ctx, workdir, events: list):
    return Caller(run_scope(ctx, events), workdir)


def prompt(ctx, text: str) -> IterationEvidence:
    ev = IterationEvidence(ctx.run.dir, "MT-001", 1)
    ev.write("prompt.md", text)
    return ev


def test_a_call_runs_the_level_in_the_workspace_and_its_outcome_is_kept(ws, tmp_path):
    log = tmp_path / "calls.jsonl"
    ctx = agent_context(ws, ONE, [level("fast", "good.py", "--log", str(log))])
    caller = caller_for(ctx, ws.root, [])
    ev = prompt(ctx, '## Your micro-task now: MT-001\n\nWrite "hello" to `out/a.txt`.\n\n## Checks\n')
    spawned = []
    call = caller.call(
        ctx.config.agent.levels[0], ev, key="k1", mt_id="MT-001", iteration=1, level_index=0, on_spawn=spawned.append
    )
    assert call.kind == "ok" and spawned and (ws.root / "out" / "a.txt").read_text().strip() == "hello"
    assert json.loads(ev.path("call.json").read_text())["idempotency_key"] == "k1"
    again = caller.call(
        ctx.config.agent.levels[0], ev, key="k1", mt_id="MT-001", iteration=1, level_index=0, on_spawn=spawned.append
    )
    assert again == call and len(calls(log)) == 1  # the finished call is not made twice
    said = Caller.read_output(ev)
    assert "COMPLETE" in said and "Your micro-task now" not in said  # the answer, not the prompt


def test_a_missing_cli_is_not_found_and_says_how_to_fix_it(ws):
    ctx = agent_context(ws, ONE, [{"name": "ghost", "argv": ["no-such-agent-cli", "{prompt_file}"]}])
    caller = caller_for(ctx, ws.root, [])
    lv = ctx.config.agent.levels[0]
    call = caller.call(
        lv, prompt(ctx, "do it"), key="k", mt_id="MT-001", iteration=1, level_index=0, on_spawn=lambda pid: None
    )
    assert call.kind == "not_found" and call.ends_run and not call.pauses
    reason, detail, fix = why_fatal(call, lv, "level 0 (ghost)", "[agent] levels", "MP-3.2", 2)
    assert reason == "agent_not_found" and "level 0 (ghost)" in detail
    assert "no-such-agent-cli" in fix and fix.endswith("`Approves: MP-3.2`.")


def test_every_kind_that_ends_the_run_has_its_fix():
    lv = AgentLevel(name="x", argv=["x", "{prompt_file}"])
    for kind in ("auth", "billing", "not_found", "transient", "config", "unreachable"):
        reason, _detail, fix = why_fatal(Call(kind, detail="d"), lv, "w", "[agent] levels", "MP-1.1", 3)
        assert reason.startswith("agent_") and "Approves: MP-1.1" in fix
    assert not Call("crash").ends_run and Call("usage_limit").pauses


def test_unreachable_names_the_host_and_the_one_fix():
    lv = AgentLevel(name="claude", argv=["claude", "-p"], stdin=True)
    call = Call("unreachable", detail="it could not connect", host="gw.corp:8443")
    reason, detail, fix = why_fatal(call, lv, "level 0 (claude)", "[agent] levels", "MP-1.1", 3)
    assert reason == "agent_unreachable" and "kept the agent CLI of level 0 (claude) from gw.corp:8443" in detail
    assert fix.startswith("Add `gw.corp:8443` to `sandbox_allow_hosts` of level 'claude' in `[agent] levels`")
    _, _, unnamed = why_fatal(Call("unreachable", detail="d"), lv, "w", "[agent] levels", "MP-1.1", 3)
    assert "`HOST:PORT`" in unnamed and "the endpoint `claude` is configured with" in unnamed
    # Its endpoint allowed but down (the relay could not reach it): an outage, the host to start.
    _, _, start = why_fatal(Call("transient", detail="d", host="gw:8080"), lv, "w", "[agent] levels", "MP-1.1", 3)
    assert start.startswith("Start `gw:8080`, or correct its URL where it is set")
    _, _, wait = why_fatal(Call("transient", detail="d"), lv, "w", "[agent] levels", "MP-1.1", 3)
    assert wait.startswith("Wait until the provider is back")


@pytest.mark.skipif(problem() is not None, reason=f"the sandbox cannot run here: {problem()}")
def test_in_the_sandbox_the_configured_endpoint_is_reached_and_any_other_host_is_unreachable(ws, monkeypatch):
    """issue #44: no `sandbox_allow_hosts` names the endpoint the level passes through; the
    sandbox allows it anyway, and the evidence says why. A host nothing configures is
    refused, and the call says so (not a crash)."""
    endpoint, other = TcpServer(_http_ok), TcpServer(_http_ok)
    monkeypatch.setenv("OPENAI_API_BASE", f"http://127.0.0.1:{endpoint.port}/v1")
    levels = [level("fetch", "fetcher.py", env_allow=["OPENAI_API_BASE"])]
    ctx = agent_context(ws, ONE, levels, sandbox="os")
    caller, lv = caller_for(ctx, ws.root, []), ctx.config.agent.levels[0]
    ev = prompt(ctx, "fetch")
    call = caller.call(lv, ev, key="k", mt_id="MT-001", iteration=1, level_index=0, on_spawn=lambda pid: None)
    assert call.kind == "ok", ev.path("stdout.txt").read_text()
    rules = json.loads(ev.path("sandbox.json").read_text())
    assert (
        rules["network"] == [f"127.0.0.1:{endpoint.port}"]
        and "OPENAI_API_BASE" in rules["endpoints"][rules["network"][0]]
    )
    far = lv.model_copy(update={"argv": (*lv.argv, "--fetch", f"http://127.0.0.1:{other.port}/")})
    ev2 = IterationEvidence(ctx.run.dir, "MT-001", 2)
    ev2.write("prompt.md", "fetch")
    call = caller.call(far, ev2, key="k2", mt_id="MT-001", iteration=2, level_index=0, on_spawn=lambda pid: None)
    assert call.kind == "unreachable" and call.host == f"127.0.0.1:{other.port}" and call.ends_run, call
    assert other.accepted == [] and "Connection refused" in call.detail
    endpoint.close()
    other.close()


def _http_ok(conn) -> None:
    conn.recv(4096)
    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
    conn.close()


def test_a_turn_limit_reaches_the_cli_and_a_call_past_it_never_completes_the_mp(engine_for, ws):
    """Issue #42: the level's `max_turns` goes where its argv says (`{max_turns}`; claude gets
    `--max-turns N`), and the CLI's own report is held to it: 13 turns past the limit with the
    work done, the checks passing and completion claimed is a failed iteration, every time."""
    from tests.agentutil import only_run, records
    from tests.conftest import drop, result_field

    over = level("overrun", "overrun.py", "--max-turns", "{max_turns}", max_turns=5)
    engine = engine_for([over], max_iterations=2, max_no_progress=5)
    drop(ws, ONE)
    assert engine.tick().action == "error"
    assert result_field(ws, "Certificate") == "TIMEOUT"
    recs = records(only_run(ws))
    assert len(recs) == 2 and (ws.root / "out" / "a.txt").exists() is False
    for rec in recs:
        assert rec["call"]["kind"] == "turn_limit" and rec["claimed"] and rec["failing"] == [] and not rec["gate"]
        assert rec["call"]["detail"] == "the call ran 18 turns, past --max-turns 5: its report is not believed"
        assert rec["error"] == "call:turn_limit"


def test_a_call_within_its_turn_limit_completes(engine_for, ws):
    from tests.conftest import drop, result_field

    within = level("within", "overrun.py", "--max-turns", "{max_turns}", "--within", max_turns=5)
    engine = engine_for([within])
    drop(ws, ONE)
    assert engine.tick().action == "completed" and result_field(ws, "Certificate") == "EXACT"


def test_claude_gets_max_turns_on_its_command_line():
    from mp_engine.agent.call.chain import render_argv

    lv = AgentLevel(name="claude", argv=["claude", "-p", "--output-format", "json"], stdin=True, max_turns=60)
    assert render_argv(lv, {}) == ["claude", "--max-turns", "60", "-p", "--output-format", "json"]
    try:
        AgentLevel(name="codex", argv=["codex", "exec", "-"], stdin=True, max_turns=5)
    except ValueError as e:
        assert "takes no turn limit the engine knows" in str(e)
    else:
        raise AssertionError("codex has no turn limit: max_turns must be refused")
