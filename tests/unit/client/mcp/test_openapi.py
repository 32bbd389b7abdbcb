"""The GPT Action's OpenAPI document: valid OpenAPI 3.1 (a maintained validator), one
operation per tool with its scope, and the HTTP status for each kind of failure. (Each
operation over HTTP with the bearer token: tests/e2e/cmd_mcp/test_action.py.)"""

from __future__ import annotations

from openapi_spec_validator import validate

from mp_engine.client.mcp.openapi import PATHS, _status, document
from mp_engine.client.mcp.tools import operations
from mp_engine.client.orchestrate import Orchestrator


def test_the_document_validates_and_names_every_operation(tmp_path):
    ops = operations(Orchestrator(str(tmp_path / "none")))
    for oauth in (False, True):
        spec = document(ops, "https://mp.example.org", oauth)
        validate(spec)
        found = {op["operationId"]: op for path in spec["paths"].values() for op in path.values()}
        assert set(found) == set(ops) == set(PATHS)
    assert spec["servers"] == [{"url": "https://mp.example.org"}]
    flow = spec["components"]["securitySchemes"]["oauth"]["flows"]["authorizationCode"]
    assert flow["authorizationUrl"] == "https://mp.example.org/authorize" and set(flow["scopes"]) == {
        "mp:read",
        "mp:write",
    }
    assert found["send_mp"]["security"][1] == {"oauth": ["mp:write"]}
    assert (
        found["cancel"]["x-openai-isConsequential"] is True and found["get_status"]["x-openai-isConsequential"] is False
    )
    body = found["send_mp"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["text"] and "```bash" in body["properties"]["text"]["description"]
    run_file = {p["name"]: p for p in found["get_run_file"]["parameters"]}
    assert run_file["run_id"]["in"] == "path" and run_file["path"]["in"] == "query"


def test_failures_map_to_http_statuses():
    assert _status({"sent": True}) == 200
    assert _status({"valid": False, "reason": "x"}) == 400
    assert _status({"refused": "halted"}) == 409
    assert _status({"error": "this token lacks the scope mp:write"}) == 403
    assert _status({"done": False, "status": "unknown", "error": "no MP MP-9.9 was sent or seen"}) == 404
    assert _status({"error": "no run 2026 on the remote"}) == 404
