"""The channel as its remote's tip shows it, for the orchestrator's side (`send`, `status
--remote`, `mp-engine mcp`): the state the engine pushed, the results index, where an MP
is, and what is `Already` there so that nothing is sent twice."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mp_engine.core.workspace import STATE_FILE, SYSTEM_DIR
from mp_engine.inbox.header import header_summary
from mp_engine.inbox.mpfile import MicroProject
from mp_engine.record.digest import INDEX
from mp_engine.sync.session import GitSession

INDEX_PATH = f"{SYSTEM_DIR}/{INDEX}"


@dataclass(frozen=True)
class Already:
    """Nothing was sent: the remote has this already. `what` is "waiting" (these bytes are
    in the remote's inbox, sent in `commit`), "ran" (a result names these bytes) or
    "finished" (a cancel for an MP whose result is in); `result` is its results.jsonl entry."""

    what: str
    commit: str
    result: dict[str, Any] | None = None

    def say(self, mp_id: str) -> str:
        r = self.result or {}
        if self.what == "waiting":
            return f"{mp_id} is already waiting in the remote's inbox (sent in {self.commit[:12]}); nothing sent"
        if self.what == "ran":
            return (
                f"{mp_id} already ran with these exact bytes (run {r.get('run_id')}: {r.get('status')}); nothing "
                "sent. To run it again on purpose, send it with --rerun (MCP: rerun=true)"
            )
        return f"{mp_id} already finished ({r.get('status')}, run {r.get('run_id')}); nothing to cancel, nothing sent"


def field_of(text: str, key: str) -> str | None:
    for line in text.splitlines():
        if line.startswith(f"{key}: "):
            return line.split(": ", 1)[1].strip()
    return None


def results_at(s: GitSession, commit: str) -> list[dict[str, Any]]:
    """SYSTEM/results.jsonl at `commit`, oldest first (lines that do not parse are skipped)."""
    out = []
    for line in (s.blob(commit, INDEX_PATH) or b"").decode("utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def state_at(s: GitSession, commit: str) -> dict:
    """SESSION_STATE.json at `commit` ({} when missing or unreadable)."""
    blob = s.blob(commit, STATE_FILE)
    try:
        data = json.loads(blob) if blob else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def cannot_run(state: dict, mp: MicroProject, force_hint: str | None) -> str | None:
    """Why `mp` could not run on an engine in `state`, or None; `force_hint` says how the
    caller sends it anyway (None: it cannot)."""
    halt = state.get("halt") or {}
    lifts = {halt.get("mp_id"), halt.get("run_id")} - {None}
    if not halt or mp.approves in lifts or mp.answers in lifts:
        return None
    anyway = (
        f", or {force_hint} (it then waits, and is SUPERSEDED by the next MP sent before the halt is lifted)"
        if force_hint
        else ""
    )
    return (
        f"the engine is halted on {halt.get('mp_id')} ({halt.get('reason', 'see its result')}) and {mp.mp_id} does "
        f"not approve it, so it could not run. Add the header line `Approves: {halt.get('mp_id')}` to the MP "
        f"(after fixing what failed){anyway}."
    )


def describe_pending(pending: bytes, state: dict) -> str:
    line = header_summary(pending)
    if state.get("status") == "RUNNING" and line.startswith(str(state.get("current"))):
        return f"the engine is running {state.get('current')} (run {state.get('run_id')})"
    return f"{line} is waiting in the remote's inbox (the engine has not taken it yet)"


def progress_line(state: dict, mp_id: str | None = None) -> str:
    """One line on where the engine is, as the remote shows it; with `mp_id`, where that
    MP is."""
    status, current = state.get("status", "?"), state.get("current", "?")
    if mp_id is None:
        return progress_line(state, current) if status in ("RUNNING", "ERROR") else f"the engine is {status}, idle"
    if status == "RUNNING" and current == mp_id:
        return f"{mp_id} is RUNNING (run {state.get('run_id')})"
    if status == "RUNNING":
        return f"{mp_id} is queued; the engine is running {current}"
    if status == "ERROR" and state.get("halt"):
        halt = state["halt"]
        return f"the engine is halted on {halt.get('mp_id')}: {halt.get('reason')}"
    return f"{mp_id} is not taken yet; the engine is {status}"
