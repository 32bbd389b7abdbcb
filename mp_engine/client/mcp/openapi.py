"""The GPT Action path of `mp-engine mcp --http`: for a Custom GPT (ChatGPT without developer
mode), the same operations as the MCP tools at `/api/v1/...`, described by `/openapi.json`
(OpenAPI 3.1), with the same auth (the static bearer token as the Action's API key, or
OAuth with a client added by `mp-engine mcp clients add`) and the same scopes.

Reads are GET with query parameters, writes POST with a JSON body. A failure answers with
the same JSON as the MCP tool and an HTTP status: 400 invalid argument or MP, 403 missing
scope, 404 nothing by that name, 409 refused (the engine is halted), 413 a body over the
cap (an MP at the engine's size limit, JSON-escaped), refused before it is read in full.
"""

from __future__ import annotations

import re
from typing import Any

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route, Router

from mp_engine import __version__
from mp_engine.client.mcp.gate.body import BodyCap, megabytes
from mp_engine.client.mcp.provider import SCOPES
from mp_engine.client.mcp.tools import Operation, call, failed

PREFIX = "/api/v1"
# operation -> (method, path under PREFIX); {name} segments are path parameters
PATHS = {
    "send_mp": ("post", "/mps"),
    "wait_result": ("get", "/mps/{mp}/result"),
    "get_status": ("get", "/status"),
    "list_results": ("get", "/results"),
    "get_run_file": ("get", "/runs/{run_id}/file"),
    "approve": ("post", "/mps/{mp_id}/approve"),
    "cancel": ("post", "/mps/{mp_id}/cancel"),
    "answer": ("post", "/mps/{mp_id}/answer"),
}
ANSWER = {
    "type": "object",
    "additionalProperties": True,
    "description": "The operation's answer (see its description).",
}
FAILURES = {
    "400": "An invalid argument or MP: `error` or `reason` says what, `fix` what to do.",
    "401": "No token, or a token that is not valid (expired or revoked).",
    "403": "The token lacks the scope this operation needs.",
    "404": "Nothing by that name: `error` says what was looked for.",
    "409": "Refused: `refused` says why (the engine is halted) and what lifts it.",
}


def document(ops: dict[str, Operation], public_url: str, oauth: bool) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the operations, served at the public URL.
    Long because it is the document itself, path by path."""
    paths: dict[str, dict[str, Any]] = {}
    for name, (method, path) in PATHS.items():
        op = ops[name]
        schema = op.arguments().model_json_schema()
        props: dict[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", []))
        in_path = re.findall(r"{(\w+)}", path)
        doc = " ".join((op.fn.__doc__ or "").split())
        entry: dict[str, Any] = {
            "operationId": name,
            "summary": doc.split(". ")[0].rstrip(".")[:120],
            "description": doc,
            "x-openai-isConsequential": op.kind != "read",
            "security": [{"bearer": []}] + ([{"oauth": [op.scope]}] if oauth else []),
            "responses": {
                "200": {"description": "The answer.", "content": {"application/json": {"schema": ANSWER}}},
                **{
                    code: {"description": text, "content": {"application/json": {"schema": ANSWER}}}
                    for code, text in FAILURES.items()
                },
            },
        }
        params = [_parameter(n, props[n], "path", True) for n in in_path]
        rest = {n: p for n, p in props.items() if n not in in_path}
        if method == "get":
            params += [_parameter(n, p, "query", n in required) for n, p in rest.items()]
        elif rest:
            body = {"type": "object", "properties": {n: _clean(p) for n, p in rest.items()}}
            if required - set(in_path):
                body["required"] = sorted(required - set(in_path))
            entry["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
        if params:
            entry["parameters"] = params
        paths.setdefault(PREFIX + path, {})[method] = entry
    schemes: dict[str, Any] = {"bearer": {"type": "http", "scheme": "bearer"}}
    if oauth:
        schemes["oauth"] = {
            "type": "oauth2",
            "flows": {
                "authorizationCode": {
                    "authorizationUrl": f"{public_url}/authorize",
                    "tokenUrl": f"{public_url}/token",
                    "refreshUrl": f"{public_url}/token",
                    "scopes": {s: s.replace("mp:", "mp-engine: ") for s in SCOPES},
                }
            },
        }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "mp-engine",
            "version": __version__,
            "description": "Drive mp-engine, which runs micro-projects (MPs) on a remote host: send an MP, then "
            "wait for its result; read the engine's status, results and run files; approve a halt, cancel, answer.",
        },
        "servers": [{"url": public_url}],
        "paths": paths,
        "components": {"securitySchemes": schemes},
    }


def _clean(prop: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in prop.items() if k != "title"}


def _parameter(name: str, prop: dict[str, Any], where: str, required: bool) -> dict[str, Any]:
    schema = _clean(prop)
    return {
        "name": name,
        "in": where,
        "required": required,
        "description": schema.pop("description", name),
        "schema": schema,
    }


def routes(
    ops: dict[str, Operation], public_url: str, oauth: bool, resource_metadata_url: Any, body_limit: int = 2 << 20
) -> list[Any]:
    """`/openapi.json` (open) and the operations under /api/v1 (behind the bearer check,
    then a cap on the body, before anything reads it: issue #46)."""
    spec = document(ops, public_url, oauth)

    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(spec)

    api = [Route(path, _endpoint(name, ops[name]), methods=[method.upper()]) for name, (method, path) in PATHS.items()]
    guarded = RequireAuthMiddleware(BodyCap(Router(api), body_limit, _too_big), [], resource_metadata_url)
    return [Route("/openapi.json", openapi, methods=["GET"]), Mount(PREFIX, app=guarded)]


def _endpoint(name: str, op: Operation) -> Any:
    model = op.arguments()

    async def endpoint(request: Request) -> JSONResponse:
        given: dict[str, Any] = dict(request.query_params) if request.method == "GET" else {}
        if request.method == "POST" and (await request.body()).strip():
            try:
                body = await request.json()
            except ValueError:
                body = None
            if not isinstance(body, dict):
                return JSONResponse({"error": "the body is not a JSON object", "fix": "Send a JSON object."}, 400)
            given.update(body)
        given.update(request.path_params)
        try:
            arguments = model.model_validate(given).model_dump()
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())
            return JSONResponse({"error": problems, "fix": "Give the parameters the description names."}, 400)
        token = get_access_token()
        granted = token.scopes if token is not None else []
        out = await anyio.to_thread.run_sync(lambda: call(name, op, arguments, granted, "api"))
        return JSONResponse(out, _status(out))

    return endpoint


def _too_big(limit: int) -> JSONResponse:
    return JSONResponse(
        {
            "error": f"the request's body is larger than {megabytes(limit)}",
            "fix": "Send a smaller MP: the engine refuses one over 1 MiB ([engine] max_mp_bytes).",
        },
        413,
    )


def _status(out: dict[str, Any]) -> int:
    if not failed(out):
        return 200
    if "refused" in out:
        return 409
    if "lacks the scope" in str(out.get("error")):
        return 403
    if out.get("status") == "unknown" or str(out.get("error", "")).startswith("no "):
        return 404
    return 400
