"""Health as the daemon sees it and reports it: sync failures and the last good sync, and
one line that says what the engine does (systemd's STATUS=, `mp-engine status`)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mp_engine.agent.progress import load_report
from mp_engine.core.atomic import atomic_write
from mp_engine.core.clock import now_iso, parse_iso
from mp_engine.core.errors import InvalidMPError
from mp_engine.core.workspace import INBOX_FILE, RUN_LEDGER, Workspace
from mp_engine.record import journal

if TYPE_CHECKING:  # `status` passes a record.stateview.StateView: same attributes, no pydantic
    from mp_engine.record.stateview import StateFields
SYNC_OK_FILE = "last_sync_ok"  # in SYSTEM/.engine/: when a sync last succeeded (for status)
SYNC_FAILURES = ("sync_failed", "sync_unreachable", "sync_push_deferred", "sync_conflict", "sync_refused")


def read_last_sync_ok(local_dir: Path) -> str | None:
    try:
        return (local_dir / SYNC_OK_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def record_sync_ok(local_dir: Path) -> None:
    try:
        atomic_write(local_dir / SYNC_OK_FILE, now_iso() + "\n", durable=False)
    except OSError as e:
        import structlog

        structlog.get_logger("mp_engine.health").warning("could not record the last successful sync", error=str(e))


def ago(iso: str | None, now: datetime | None = None) -> str:
    """How long ago, coarsely: "just now", "3 min ago", "2 h ago", "5 d ago" (STATUS=
    then changes once a minute, not on every pass)."""
    if not iso:
        return "never"
    try:
        seconds = ((now or datetime.now(UTC)) - parse_iso(iso)).total_seconds()
    except ValueError:
        return iso
    if seconds < 60:
        return "just now"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


@lru_cache(maxsize=8)
def _blocks(mp_copy: str, _mtime_ns: int) -> tuple[tuple[str, ...], int, dict[str, str]]:
    from mp_engine.inbox.mpfile import parse  # lazy: only a running MP needs its blocks (bench figure 8)

    data = Path(mp_copy).read_bytes()
    mp = parse(data, max_bytes=len(data) + 1)
    return tuple(b.step_id for b in (*mp.steps, *mp.checks)), len(mp.steps), dict(mp.headers)


def current_step(ws: Workspace, run_id: str) -> dict[str, Any] | None:
    """The block a run is on, `{"id", "number", "of"}` (among steps and checks), from its MP
    copy and ledger, and `label` for a person ("step 2/3", "check 1/1": a check is no step,
    issue #44); with `started_at` when it is running, and the MP's `Step-Timeout:`/`Timeout:`
    headers."""
    run_dir = ws.runs_dir / run_id
    try:
        ids, steps_count, headers = _blocks(str(run_dir / INBOX_FILE), os.stat(run_dir / INBOX_FILE).st_mtime_ns)
        ledger = journal.read(run_dir / RUN_LEDGER)  # with the step transitions of its journal
    except (OSError, ValueError, InvalidMPError):
        return None
    steps = ledger.get("steps") or []
    if not ids:
        return None
    live_step = next((st for st in steps if st.get("status") == "in_progress"), None)
    live = live_step["step_id"] if live_step else None
    out: dict[str, Any] = {}
    if live in ids:
        number = ids.index(live) + 1
        out["started_at"] = live_step.get("started_at")  # type: ignore[union-attr]
    else:
        done = sum(1 for st in steps if st.get("status") in ("completed", "failed"))
        number = min(done + 1, len(ids))
        live = ids[number - 1]
    out.update(id=live, number=number, of=len(ids), run_started_at=ledger.get("created_at"))
    if number <= steps_count:
        out["label"] = f"step {number}/{steps_count}"
    else:
        out["label"] = f"check {number - steps_count}/{len(ids) - steps_count}"
    out.update(
        {k: float(headers[h]) for k, h in (("step_timeout", "Step-Timeout"), ("mp_timeout", "Timeout")) if h in headers}
    )
    return out


def status_line(ws: Workspace, state: StateFields, now: datetime | None = None) -> str:
    """One line for a person: "idle, last MP-1.4 COMPLETED 3 min ago", "running MP-1.5
    step 2/4", "running MP-1.5 MT-002 iteration 3 level 1", "halted: MP-1.5 ERROR awaiting approval"."""
    if state.halt is not None:
        return f"halted: {state.halt.mp_id} ERROR awaiting approval ({state.halt.reason})"[:200]
    if state.run_id:
        mp = state.current
        if state.waiting:
            return f"waiting {mp}: {state.waiting.get('kind')} until {state.waiting.get('resume_at')}"
        agent = load_report(ws.runs_dir / state.run_id)
        if agent is not None and agent.get("running"):
            ids = ", ".join(r["mt"] for r in agent["running"])
            return f"running {mp} {ids} ({len(agent['running'])} micro-tasks at once)"
        if agent is not None:
            c = agent["current"]
            if c.get("active_mt"):
                return f"running {mp} {c['active_mt']} iteration {c.get('iteration') or 1} level {c.get('level') or 0}"
            return f"running {mp} (agent)"
        step = current_step(ws, state.run_id)
        return f"running {mp} {step['label']}" if step else f"running {mp}"
    last = state.last_result
    if last:
        return f"idle, last {last['mp_id']} {last['status']} {ago(last.get('finished_at'), now)}"
    return "idle, no MP run yet"


def pull_request_beat(pr: dict[str, Any]) -> dict[str, Any]:
    """A run's pull request as the heartbeat carries it (small: a commit message)."""
    keys = ("number", "url", "head", "head_sha", "ci_now", "review_rounds", "ended")
    return {
        **{k: pr.get(k) for k in keys},
        "ci_rounds": [r.get("state") for r in pr.get("ci_rounds") or []],
        "waiting": (pr.get("waiting") or {}).get("kind"),
    }


def progress_of(ws: Workspace, run_id: str) -> dict[str, Any] | None:
    """What run `run_id` is doing, for the heartbeat an orchestrator reads: the agent's
    micro-task and iteration, or the shell step (`current_step`)."""
    from mp_engine.agent.progress import load_report  # lazy, as in status

    agent = load_report(ws.runs_dir / run_id)
    if agent is None:
        step = current_step(ws, run_id)
        return {"step": {k: step.get(k) for k in ("id", "number", "of", "started_at")}} if step else None
    pr = agent.get("pull_request")
    beat = {"pull_request": pull_request_beat(pr)} if pr else {}
    if agent.get("running"):  # parallel tasks: each one running
        keys = ("mt", "iteration", "level_name", "elapsed", "last_line")
        return {
            "micro_tasks": [
                {**{k: r.get(k) for k in keys}, **({"runs_on": r["runs_on"]} if r.get("runs_on") else {})}
                for r in agent["running"]
            ],
            **beat,
        }
    c = agent.get("current") or {}
    return {
        "micro_task": {
            "id": c.get("active_mt"),
            "number": c.get("mt_number"),
            "of": agent.get("micro_tasks"),
            "iteration": c.get("iteration"),
            "level": c.get("level_name"),
        },
        **beat,
    }
