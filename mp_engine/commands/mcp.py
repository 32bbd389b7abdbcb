"""`mp-engine mcp --repo URL`: the orchestrator's side of the channel as an MCP server
(docs/ORCHESTRATORS.md), on the official MCP Python SDK (`mcp`, imported only here).

Tools (commands/orchestrate.py does the work, with the same code as `mp-engine send`):
send_mp, wait_result, get_status, list_results, get_run_file (read-only but for the first),
approve and cancel (destructive). Transports: stdio (Claude Desktop, Claude Code, the
Agents SDK), or streamable HTTP (`--http HOST:PORT`; ChatGPT's developer mode) behind a
bearer token, checked in constant time by the SDK's token verifier. Every call is logged
as an event on stderr: the tool, its arguments (an MP's text only as its length) and the
outcome.
"""

from __future__ import annotations

import functools
import hmac
import os
import secrets
import sys
import time
from collections.abc import Callable
from typing import Any

import structlog

from mp_engine import __version__
from mp_engine.commands.orchestrate import MAX_WAIT, Orchestrator
from mp_engine.config import is_loopback
from mp_engine.exitcodes import ExitCode

TOKEN_ENV = "MP_ENGINE_MCP_TOKEN"
log = structlog.get_logger("mp_engine.mcp")

INSTRUCTIONS = """\
You drive mp-engine, a daemon that runs micro-projects (MPs) on a remote host and reports
through a git repository. An MP is Markdown: the first line `# MP-<major>.<minor> Title`,
optional header lines directly under it (`Timeout: 600`, `Approves: MP-1.3`,
`Executor: agent`), then fenced ```bash blocks run in order (```file <path> writes a
file), and an optional `## Validate` section whose ```bash blocks are checks. An
`Executor: agent` MP is natural-language work for the engine's coding agents instead: a
numbered list of tasks (an item may say `(after MT-001)`), or, with the header `Plan: auto`,
a goal the engine's planner splits into tasks; its `## Validate` checks alone decide that
it is done, so give it checks. Use a new id for every MP. Send with send_mp, then call wait_result with the MP id until done is
true (each call waits at most 25 s). A failed MP halts the engine: read the result's
diagnosis and its one fix, then send the corrected MP with approve (it adds
`Approves: <failed id>`). An agent MP that ended asking a question (its diagnosis says
so) goes on when you answer it with answer. get_status tells whether the engine is up,
running or halted.
"""


class StaticToken:
    """The SDK's `TokenVerifier` for one shared secret, compared in constant time."""

    def __init__(self, token: str):
        self._token = token.encode()

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        if hmac.compare_digest(token.encode(), self._token):
            return AccessToken(token="bearer", client_id="orchestrator", scopes=[])
        return None


def _logged(tool: str, fn: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    @functools.wraps(fn)  # the SDK reads the tool's schema from fn's signature
    def call(**kwargs: Any) -> dict[str, Any]:
        shown = {k: (f"<{len(v)} characters>" if k == "text" else v) for k, v in kwargs.items()}
        started = time.monotonic()
        try:
            out = fn(**kwargs)
        except Exception as e:  # an MCP error for the client; the event says what broke
            log.warning("mcp_tool_call", tool=tool, arguments=shown, outcome=f"failed: {e}")
            raise
        outcome = {k: out[k] for k in ("sent", "done", "status", "error", "already", "refused", "valid") if k in out}
        log.info(
            "mcp_tool_call", tool=tool, arguments=shown, outcome=outcome, seconds=round(time.monotonic() - started, 3)
        )
        return out

    return call


def build_server(orch: Orchestrator, token: str | None = None, url: str | None = None) -> Any:
    """The MCP server with the eight tools; with `token`, HTTP requests need it."""
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    auth: dict[str, Any] = {}
    if token is not None:
        auth = {
            "token_verifier": StaticToken(token),
            "auth": AuthSettings(issuer_url=url or "http://127.0.0.1", resource_server_url=url),
        }
    server = MCPServer("mp-engine", instructions=INSTRUCTIONS, version=__version__, **auth)
    read = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True)

    def send_mp(text: str) -> dict[str, Any]:
        """Send an MP (its whole Markdown text) to the engine: it is validated first (an
        invalid MP is not sent: the answer has the reason, the line and the one fix), then
        committed to the remote's inbox. Sending the same text again does nothing (the MP's
        SHA-256 identifies it). Refused with the reason when the engine is halted and this
        MP does not approve the halt (use approve). Returns the MP id and SHA-256."""
        return orch.send_mp(text)

    def wait_result(mp: str, max_wait_s: float = MAX_WAIT) -> dict[str, Any]:
        """Wait up to max_wait_s seconds (at most 25) for the result of an MP, named by its
        id (MP-1.4) or SHA-256. done=true: `result` is the result document (status
        COMPLETED, ERROR, CANCELLED, SUPERSEDED or REFUSED; an ERROR has `diagnosis` with
        the fix). done=false: still waiting or running, with the current step or
        micro-task; call again."""
        return orch.wait_result(mp, max_wait_s)

    def get_status() -> dict[str, Any]:
        """The engine as the remote shows it: its state (ONLINE, RUNNING, ERROR), a halt and
        what lifts it, the MP waiting in the inbox, and whether the engine is up (its
        heartbeat: up, stopped, silent)."""
        return orch.get_status()

    def list_results(limit: int = 20) -> dict[str, Any]:
        """The latest results, newest first: MP id, SHA-256, status, run id, summary."""
        return orch.list_results(limit)

    def get_run_file(run_id: str, path: str, max_bytes: int = 65536) -> dict[str, Any]:
        """One file of a run's archive (as result documents name them, for example
        steps/step-001.stdout), at most max_bytes (up to 1 MiB) of it. Only files inside
        that run's directory can be read."""
        return orch.get_run_file(run_id, path, max_bytes)

    def approve(mp_id: str, text: str) -> dict[str, Any]:
        """DESTRUCTIVE: lift the halt on the failed MP mp_id by sending `text`, the
        corrective MP, with the header line `Approves: <mp_id>` (added when missing). The
        engine then runs it: use it only after reading the failure's diagnosis."""
        return orch.send_mp(text, approves=mp_id)

    def cancel(mp_id: str) -> dict[str, Any]:
        """DESTRUCTIVE: cancel the MP mp_id: stop it if it is running (its step is killed,
        later steps do not run) or drop it if it waits in the inbox. Its result says
        CANCELLED (wait_result)."""
        return orch.cancel(mp_id)

    def answer(mp_id: str, text: str) -> dict[str, Any]:
        """Answer the agent MP mp_id, which ended asking a question (the engine is halted
        on it; its result's diagnosis has the question): `text` is the answer. The same
        run goes on with it; wait_result(mp_id) then waits for its new result."""
        return orch.answer(mp_id, text)

    write = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True)
    danger = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)
    for fn, notes in (
        (send_mp, write),
        (wait_result, read),
        (get_status, read),
        (list_results, read),
        (get_run_file, read),
        (approve, danger),
        (cancel, danger),
        (answer, write),
    ):
        server.add_tool(_logged(fn.__name__, fn), name=fn.__name__, description=fn.__doc__, annotations=notes)
    return server


def serve(repo: str, branch: str, http: str | None, token: str | None, err: Callable[[str], None]) -> ExitCode:
    """`mp-engine mcp`: serve until the client goes (stdio) or SIGINT/SIGTERM (HTTP)."""
    import anyio

    orch = Orchestrator(repo, branch)
    if http is None:
        anyio.run(build_server(orch).run_stdio_async)
        return ExitCode.OK
    host, _, port_text = http.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port_text.isdigit():
        err(f"mp-engine mcp: --http wants HOST:PORT (like 127.0.0.1:8765), not {http!r}")
        return ExitCode.USAGE
    token = token or os.environ.get(TOKEN_ENV)
    if not token:
        if not is_loopback(host):
            err(
                f"mp-engine mcp: refusing to serve on {host} without a token: anyone who can reach it could "
                f"run commands on the engine host. Set {TOKEN_ENV} (or --token), or bind to 127.0.0.1."
            )
            return ExitCode.USAGE
        token = secrets.token_urlsafe(24)
        err(f"mp-engine mcp: no token given; this run's bearer token is {token}")
    url = f"http://{host}:{port_text}/mcp"
    err(f"mp-engine mcp: serving {repo} ({branch}) at {url}")
    sys.stderr.flush()
    server = build_server(orch, token=token, url=url)
    anyio.run(lambda: server.run_streamable_http_async(host=host, port=int(port_text)))
    return ExitCode.OK
