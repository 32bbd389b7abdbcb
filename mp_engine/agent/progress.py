"""The ProgressArtifact: `agent/progress.json` in the run archive.

It holds what the ledger cannot rebuild (the run's nonce, the workspace baseline, pauses
and the current wait) and a snapshot of the loop's state for `mp-engine status` and the
result: the active micro-task, iteration, level, residual and budget left. The loop's
decisions are rebuilt from the ledger on resume, never from this snapshot.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mp_engine.agent.call.usage import describe
from mp_engine.core.atomic import atomic_write
from mp_engine.core.clock import now_iso

PROGRESS_FILE = "agent/progress.json"
BASELINE_FILE = "agent/baseline.json"


class Progress:
    def __init__(self, path: Path, data: dict[str, Any]):
        self.path = Path(path)
        self.data = data

    @classmethod
    def load(cls, run_dir: Path) -> Progress | None:
        path = Path(run_dir) / PROGRESS_FILE
        try:
            return cls(path, json.loads(path.read_text(encoding="utf-8")))
        except (FileNotFoundError, ValueError):
            return None

    @classmethod
    def create(
        cls,
        run_dir: Path,
        *,
        mp_id: str,
        run_id: str,
        policy: dict[str, Any],
        tasks: list[dict[str, Any]],
        base: dict[str, Any],
        parallel: int = 1,
    ) -> Progress:
        """A new run's progress; `parallel`: its tasks at once, kept for a restart."""
        now = now_iso()
        progress = cls(
            Path(run_dir) / PROGRESS_FILE,
            {
                "schema_version": "1.0",
                "mp_id": mp_id,
                "run_id": run_id,
                "created_at": now,
                "updated_at": now,
                "completed_at": None,
                "status": "in_progress",
                "nonce": os.urandom(12).hex(),  # as secrets.token_hex(12), which status would import
                "base": base,
                "policy": policy,
                "plan": tasks,
                "current_state": {},
                "micro_tasks": [],
                "pauses": [],
                "waiting": None,
                "certificate": None,
                "parallel": parallel,
            },
        )
        progress.path.parent.mkdir(parents=True, exist_ok=True)
        progress.save(durable=True)
        return progress

    @property
    def nonce(self) -> str:
        return str(self.data["nonce"])

    @property
    def status(self) -> str:
        return str(self.data["status"])

    def save(self, *, durable: bool = False) -> None:
        self.data["updated_at"] = now_iso()
        # Compact (json's C encoder): rewritten at every iteration.
        atomic_write(self.path, json.dumps(self.data, separators=(",", ":"), sort_keys=True) + "\n", durable=durable)

    def pause(self, kind: str, reason: str, resume_at: str | None = None, *, polled: bool = False) -> bool:
        """Record a pause (SIGTERM, usage or rate limit); `waiting` when it has a time.
        `polled`: a wait the run looks at again at each entry (CI, the forge or a remote
        away): while the same one goes on, its entry is brought up to date, not repeated.
        True when the pause is a new one."""
        going_on = self.polling()
        again = polled and going_on is not None and going_on["kind"] == kind
        self.data["status"] = "waiting" if resume_at else "paused"
        self.data["waiting"] = {"kind": kind, "reason": reason, "resume_at": resume_at} if resume_at else None
        if again and going_on is not None:
            going_on.update(reason=reason, resume_at=resume_at)
        else:
            entry = {"at": now_iso(), "kind": kind, "reason": reason, "resume_at": resume_at}
            self.data["pauses"].append({**entry, "polled": True} if polled else entry)
        self.save(durable=True)
        return not again

    def polling(self) -> dict[str, Any] | None:
        """The polled wait that goes on (the last pause, polled and not ended), if any."""
        last = self.data["pauses"][-1] if self.data["pauses"] else None
        return last if last is not None and last.get("polled") and not last.get("ended_at") else None

    def end_poll(self) -> dict[str, Any] | None:
        """The polled wait that went on is over: marked so and returned (None: there was none)."""
        going_on = self.polling()
        if going_on is not None:
            going_on["ended_at"] = now_iso()
        return going_on

    def resumed(self) -> dict[str, Any] | None:
        """Leave a pause; return the pause that ended, if any."""
        if self.data["status"] not in ("paused", "waiting"):
            return None
        self.data["status"] = "in_progress"
        self.data["waiting"] = None
        return self.data["pauses"][-1] if self.data["pauses"] else {"kind": "unknown"}


def load_report(run_dir: Path) -> dict[str, Any] | None:
    """What `mp-engine status` shows about a live agent run (None for other runs)."""
    progress = Progress.load(run_dir)
    if progress is None:
        return None
    d = progress.data
    return {
        "status": d["status"],
        "current": d.get("current_state") or {},
        "waiting": d.get("waiting"),
        "micro_tasks": len(d.get("plan") or []),
        "tasks": d.get("micro_tasks") or [],
        "campaign": d.get("campaign") or {},
        "running": d.get("running") or [],  # parallel tasks: each one running now
        "parallel": d.get("parallel") or 1,
        "updated_at": d.get("updated_at"),
        "usage": d.get("usage"),
        "pull_request": d.get("pull_request"),  # a run that lands as one (issue #41)
    }


def pull_request_line(pr: dict[str, Any]) -> str:
    """A pull request as `status` shows it: where, CI's word, the rounds and their bounds."""
    ci = pr.get("ci_now") or (pr["ci_rounds"][-1]["state"] if pr.get("ci_rounds") else "not judged yet")
    ci_max = f" of {pr['ci_rounds_max']}" if pr.get("ci_rounds_max") else ""
    review_max = f" of {pr['review_rounds_max']}" if pr.get("review_rounds_max") is not None else ""
    where = f"#{pr['number']} {pr.get('url')}" if pr.get("number") else f"not opened yet ({pr.get('head')})"
    ended = f"; ended: {pr['ended']}" if pr.get("ended") else ""
    return (
        f"{where}; CI: {ci}; CI rounds {len(pr.get('ci_rounds') or [])}{ci_max}, "
        f"review rounds {pr.get('review_rounds', 0)}{review_max}{ended}"
    )


SHOWN = {"active": "running", "completed": "done", "blocked": "failed"}  # the task states


def plan_line(agent: dict[str, Any]) -> str | None:
    """`plan: MT-001 done (3f2a…), MT-002 running, ...  [planned; 1 re-plan; drift checks: ...]`"""
    tasks, camp = agent.get("tasks") or [], agent.get("campaign") or {}
    if not tasks and not camp.get("planned"):
        return None
    shown = [
        f"{t['mt_id']} {SHOWN.get(t['status'], t['status'])}" + (f" ({t['commit'][:12]})" if t.get("commit") else "")
        for t in tasks
    ]
    notes = ["planned"] if camp.get("planned") else []
    if camp.get("pending") == "plan":
        notes.append("planning now")
    if camp.get("replans"):
        notes.append(f"{len(camp['replans'])} re-plan(s)")
    drift = camp.get("drift_checks") or []
    if drift:
        last = drift[-1]
        notes.append(f"{len(drift)} drift check(s), last at {last['at']} %: {'DRIFT' if last['drift'] else 'no drift'}")
    return f"  plan:            {', '.join(shown) or '(no task yet)'}" + (f"  [{'; '.join(notes)}]" if notes else "")


def render_lines(agent: dict[str, Any] | None, waiting: dict[str, Any] | None) -> list[str]:
    """The `mp-engine status` lines of a live agent run."""
    lines = []
    if agent and (agent.get("parallel", 1) > 1 or agent.get("running")):
        running = agent.get("running") or []
        lines.append(
            f"  agent:           {len(running)} of at most {agent['parallel']} micro-tasks running  [{agent['status']}]"
        )
        for r in running:
            lines.append(
                f"    {r['mt']}: iteration {r['iteration']}, level {r['level']} ({r['level_name']}), "
                f"{r.get('elapsed') or 0:g} s"
                + (f", {r['runs_on']}" if r.get("runs_on") else "")
                + f"; {str(r.get('last_line') or '')[:100]}"
            )
        line = plan_line(agent)
        if line:
            lines.append(line)
    elif agent:
        c = agent["current"]
        residual = c.get("residual")
        lines.append(
            f"  agent:           {c.get('active_mt') or '-'} ({c.get('mt_number') or '-'} of {c.get('micro_tasks')}), "
            f"iteration {c.get('iteration') or '-'}, level {c.get('level')} ({c.get('level_name')}), "
            f"residual {'-' if residual is None else residual}  [{agent['status']}]"
        )
        lines.append(
            f"  agent budget:    {c.get('iterations_left')} iterations and {c.get('budget_seconds_left')} s left; "
            f"{c.get('calls_last_hour')}/{c.get('calls_per_hour')} agent calls in the last hour"
        )
        line = plan_line(agent)
        if line:
            lines.append(line)
        if c.get("last_summary"):
            lines.append(f"  agent summary:   {str(c['last_summary'])[:200]}")
        trip = c.get("last_trip")
        if c.get("circuit") == "open" or trip:
            what = f"{trip.get('reason')} on {trip.get('mt')} at level {trip.get('level')}" if trip else "-"
            after = " (escalated)" if trip and trip.get("escalated") else ""
            lines.append(f"  agent circuit:   {c.get('circuit', 'closed')}; last trip: {what}{after}")
    used = (agent or {}).get("usage") or {}
    if used.get("calls"):
        lines.append(f"  agent usage:     {describe(used)}")
    if pr := (agent or {}).get("pull_request"):
        lines.append(f"  pull request:    {pull_request_line(pr)}")
    if waiting:
        lines.append(
            f"  waiting:         {waiting.get('kind')} until {waiting.get('resume_at')} ({waiting.get('reason')})"
        )
    return lines
