"""The eight operations `mp-engine mcp` offers, once: each is a Python function whose
signature (with a description per parameter) is the MCP tool's input schema and the GPT
Action's OpenAPI operation (openapi.py), whose docstring is their description, and whose
scope (`mp:read` or `mp:write`) both enforce. commands/orchestrate.py does the work.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import structlog
from pydantic import BaseModel, Field, create_model

from mp_engine.client.mcp.provider import READ, WRITE
from mp_engine.client.orchestrate import MAX_FILE_BYTES, MAX_WAIT, Orchestrator

MP_TEXT = (
    "The whole MP as Markdown: first line `# MP-<major>.<minor> Title` (a new id each time), optional header "
    "lines right under it (`Timeout: 600`, `Executor: agent`, `Plan: auto`), then ```bash blocks run in order "
    "(```file <path> writes a file), and an optional `## Validate` section whose ```bash blocks are checks. An "
    "`Executor: agent` MP holds natural-language work (a numbered task list, or a goal with `Plan: auto`) and "
    "needs `## Validate` checks."
)
MP_ID = "An MP id such as MP-1.4."
SHOWN = ("sent", "done", "status", "error", "already", "refused", "valid")
log = structlog.get_logger("mp_engine.mcp")


@dataclass(frozen=True)
class Operation:
    fn: Callable[..., dict[str, Any]]
    scope: str  # the OAuth scope a caller needs
    kind: str  # "read", "write" (idempotent) or "danger" (destructive): the MCP tool annotations

    def arguments(self) -> type[BaseModel]:
        """The function's parameters as a pydantic model (validation and JSON schema)."""
        fields: dict[str, Any] = {
            name: (p.annotation, ... if p.default is p.empty else p.default)
            for name, p in inspect.signature(self.fn, eval_str=True).parameters.items()
        }
        return create_model(f"{self.fn.__name__}_arguments", **fields)


def operations(orch: Orchestrator) -> dict[str, Operation]:
    """The operations bound to one orchestrator, by name.
    Long because it is the table of operations, one short closure each."""

    def send_mp(
        text: Annotated[str, Field(description=MP_TEXT)],
        rerun: Annotated[
            bool, Field(description="Run these exact bytes again although they already ran (default: no).")
        ] = False,
    ) -> dict[str, Any]:
        """Send an MP to the engine. It is validated first (an invalid MP is not sent: the answer
        has the reason, the line and the one fix), then committed to the remote's inbox. Sending
        the same text again sends nothing: `already` says it is `waiting` or that it `ran` (with
        its result); rerun=true runs it again on purpose. Refused with the reason when the
        engine is halted and this MP does not approve the halt (use approve). Returns the MP id
        and SHA-256; then call wait_result."""
        return orch.send_mp(text, rerun=rerun)

    def wait_result(
        mp: Annotated[str, Field(description="The MP's id (MP-1.4) or the SHA-256 send_mp returned.")],
        max_wait_s: Annotated[
            float, Field(description=f"Seconds to wait for the result before answering, at most {MAX_WAIT:g}.")
        ] = MAX_WAIT,
    ) -> dict[str, Any]:
        """Wait for the result of an MP. done=true: `result` is the result document (status
        COMPLETED, ERROR, CANCELLED, SUPERSEDED or REFUSED; an ERROR has `diagnosis` and one
        `fix`). done=false: still waiting or running, with the current step or micro-task: call
        again. An MP that was never sent is an error, not a wait. An MP landed as a pull request
        (`Repo:`) has `pull_request` (URL, number, CI rounds, review rounds) in its result, and
        while it waits for CI in the answer; a reviewer's comment resumes its run: call again
        for the result of that review round."""
        return orch.wait_result(mp, max_wait_s)

    def get_status() -> dict[str, Any]:
        """The engine as the remote shows it: its state (ONLINE, RUNNING, ERROR), a halt and
        what lifts it (`question`: what a halted agent MP asks, a plan to approve among
        them, with its tasks), the MP waiting in the inbox, whether the engine is up (its
        heartbeat: up, stopped, silent) and `pull_request`: the pull request of the running MP
        or of the last result (URL, number, CI's word, CI and review rounds)."""
        return orch.get_status()

    def list_results(
        limit: Annotated[int, Field(description="How many results, newest first (0 to 500).")] = 20,
    ) -> dict[str, Any]:
        """The latest results, newest first: MP id, SHA-256, status, run id, summary; `count`
        is how many there are in all."""
        return orch.list_results(limit)

    def get_run_file(
        run_id: Annotated[str, Field(description="A run id from a result, like 20261125T120000Z-MP-1.4.")],
        path: Annotated[str, Field(description="A file inside that run, like steps/step-001.stdout.")],
        max_bytes: Annotated[int, Field(description=f"Read at most this many bytes (up to {MAX_FILE_BYTES}).")] = 65536,
    ) -> dict[str, Any]:
        """One file of a run's archive, as result documents name them. Only files inside that
        run's directory can be read; a wrong name lists the files there."""
        return orch.get_run_file(run_id, path, max_bytes)

    def approve(
        mp_id: Annotated[str, Field(description="The failed MP the engine is halted on. " + MP_ID)],
        text: Annotated[str, Field(description="The corrective MP. " + MP_TEXT)],
    ) -> dict[str, Any]:
        """DESTRUCTIVE: lift the halt on the failed MP mp_id by sending `text`, the corrective
        MP, with the header line `Approves: <mp_id>` (added when missing). The engine then runs
        it: use it only after reading the failure's diagnosis."""
        return orch.send_mp(text, approves=mp_id)

    def cancel(mp_id: Annotated[str, Field(description="The MP to cancel. " + MP_ID)]) -> dict[str, Any]:
        """DESTRUCTIVE: cancel the MP mp_id: stop it if it is running (its step is killed, later
        steps do not run) or drop it if it waits in the inbox; its result says CANCELLED
        (wait_result). An MP that already finished is left alone: the answer says how it ended."""
        return orch.cancel(mp_id)

    def answer(
        mp_id: Annotated[str, Field(description="The agent MP that ended asking a question. " + MP_ID)],
        text: Annotated[str, Field(description="The answer to its question, in plain words.")],
    ) -> dict[str, Any]:
        """Answer the agent MP mp_id, which ended asking a question (the engine is halted on
        it; its result's diagnosis has the question). The same run goes on with the answer;
        wait_result(mp_id) then waits for its new result. A plan that waits for approval
        (`Plan: review`) takes `approve`, `cancel`, or what to change (the planner re-plans)."""
        return orch.answer(mp_id, text)

    return {
        fn.__name__: Operation(fn, scope, kind)
        for fn, scope, kind in (
            (send_mp, WRITE, "write"),
            (wait_result, READ, "read"),
            (get_status, READ, "read"),
            (list_results, READ, "read"),
            (get_run_file, READ, "read"),
            (approve, WRITE, "danger"),
            (cancel, WRITE, "danger"),
            (answer, WRITE, "write"),
        )
    }


def failed(out: dict[str, Any]) -> bool:
    """Whether an operation's answer is a failure (MCP `isError`, an HTTP error status):
    an invalid argument or MP, a refusal, something not found."""
    return "error" in out or out.get("valid") is False or "refused" in out


def missing_scope(needed: str, granted: list[str] | None) -> dict[str, Any] | None:
    """The answer for a caller whose token lacks `needed` (None: it may call)."""
    if granted is None or needed in granted:
        return None
    return {
        "error": f"this token lacks the scope {needed} (it has {' '.join(granted) or 'none'})",
        "fix": f"Connect again and grant {needed} on the consent page, or use a token that has it.",
    }


def call(name: str, op: Operation, arguments: dict[str, Any], granted: list[str] | None, via: str) -> dict[str, Any]:
    """Run one operation for a caller holding `granted` scopes (None: no auth, stdio) and
    log it as an event: the tool, its arguments (an MP's text only as its length), the
    outcome. A refusal for a missing scope is an `mcp_refused` event (403) either way."""
    shown = {k: (f"<{len(v)} characters>" if k == "text" else v) for k, v in arguments.items()}
    refused = missing_scope(op.scope, granted)
    if refused is not None:
        if via == "mcp":  # an MCP call answers 200 with isError; /api/v1's 403 is logged by guard.py
            log.warning("mcp_refused", status=403, tool=name, via=via, reason=refused["error"])
        return refused
    started = time.monotonic()
    try:
        out = op.fn(**arguments)
    except Exception as e:  # an error for the client; the event says what broke
        log.warning("mcp_tool_call", tool=name, via=via, arguments=shown, outcome=f"failed: {e}")
        raise
    outcome = {k: out[k] for k in SHOWN if k in out}
    seconds = round(time.monotonic() - started, 3)
    log.info("mcp_tool_call", tool=name, via=via, arguments=shown, outcome=outcome, seconds=seconds)
    return out
