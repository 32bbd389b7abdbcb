"""The operations' one definition: scopes, descriptions for every parameter, the failure
test behind MCP's isError and the HTTP status, and the event for each call."""

from __future__ import annotations

from mp_engine.client.mcp.provider import READ, WRITE
from mp_engine.client.mcp.tools import call, failed, missing_scope, operations
from mp_engine.client.orchestrate import Orchestrator


def test_writes_need_mp_write_and_reads_mp_read(tmp_path):
    ops = operations(Orchestrator(str(tmp_path / "none")))
    assert {n for n, op in ops.items() if op.scope == WRITE} == {"send_mp", "approve", "cancel", "answer"}
    assert {n for n, op in ops.items() if op.scope == READ} == {
        "get_status",
        "list_results",
        "get_run_file",
        "wait_result",
    }
    assert {n for n, op in ops.items() if op.kind == "danger"} == {"approve", "cancel"}


def test_every_parameter_is_described(tmp_path):
    for name, op in operations(Orchestrator(str(tmp_path / "none"))).items():
        schema = op.arguments().model_json_schema()
        for param, prop in schema.get("properties", {}).items():
            assert len(prop.get("description", "")) > 15, (name, param)
        assert op.fn.__doc__ and len(op.fn.__doc__) > 80


def test_failures_are_errors_and_a_missing_scope_is_refused_before_the_call(tmp_path, capsys):
    from mp_engine.record import logs

    logs.configure("info")
    assert failed({"error": "x"}) and failed({"valid": False}) and failed({"refused": "halted"})
    assert not failed({"sent": False, "already": "waiting"}) and not failed({"done": False})
    assert missing_scope(WRITE, None) is None and missing_scope(WRITE, [READ, WRITE]) is None
    ops = operations(Orchestrator(str(tmp_path / "none")))
    out = call("send_mp", ops["send_mp"], {"text": "# MP-1.0\n", "rerun": False}, [READ], "mcp")
    assert "lacks the scope mp:write" in out["error"] and "consent page" in out["fix"]
    bad = call("wait_result", ops["wait_result"], {"mp": "drop table", "max_wait_s": 1}, [READ], "mcp")
    assert failed(bad) and "neither an MP id" in bad["error"]
    err = capsys.readouterr().err
    assert "mcp_refused" in err and "mcp_tool_call" in err
