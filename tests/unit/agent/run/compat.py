"""The state of an agent run after each record its ledger holds, as plain data: what
test_compat.py compares with what an earlier release computed from the same ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mp_engine.agent.plan.decompose import decompose, goal_of
from mp_engine.agent.run.resume import records
from mp_engine.agent.state.loopstate import LoopState
from mp_engine.config import AgentConfig
from mp_engine.inbox.mpfile import parse
from mp_engine.record.archive import RunArchive


def views(run_dir: Path) -> dict[str, Any]:
    run = RunArchive(run_dir)
    progress = json.loads((run_dir / "agent/progress.json").read_text())
    mp = parse(run.mp_copy.read_bytes())
    cfg = AgentConfig.model_validate(progress["policy"])
    planned = (mp.headers.get("Plan") or cfg.plan) == "auto"
    plan = goal_of(mp) if planned else decompose(mp)
    recs = records(run.ledger(), run.steps_dir)
    kinds = {kind for kind, _ in recs}
    parallel = (progress.get("parallel") or 1) > 1 or "start" in kinds or "integrate" in kinds
    state = LoopState(cfg, plan, progress["base"]["digest"], planned, parallel)
    out: dict[str, Any] = {"parallel": parallel, "planned": planned, "views": [plain(view(state))]}
    for kind, rec in recs:
        effects = apply_one(state, kind, rec)
        effects_view = [[e.kind, e.name, e.event_id, e.fields] for e in (effects or [])]
        out["views"].append(plain({**view(state), "effects": effects_view}))
    return out


def plain(data: Any) -> Any:
    """A copy as JSON has it (the state's lists change as later records apply)."""
    return json.loads(json.dumps(data, default=str))


def apply_one(state: LoopState, kind: str, rec: dict[str, Any]) -> list | None:
    if kind == "answer":
        return state.apply_answer(rec)
    if state.final is not None:
        return None
    if rec.get("fatal"):
        state.apply_fatal(rec)
        return []
    appliers = {"plan": state.apply_plan, "drift": state.apply_drift, "start": state.apply_start,
                "integrate": state.apply_integration}  # fmt: skip
    if kind in appliers:
        return appliers[kind](rec)
    return state.apply(rec) if "mt" in rec else None


def cursor_view(c: Any) -> dict[str, Any]:
    return {"level": c.level, "fails": c.fails_at_level, "trend": list(c.trend), "streak": c.done_streak,
            "digest": c.last_digest, "passed": sorted(c.prev_passed), "breakers": c.breakers.to_dict()}  # fmt: skip


def view(s: LoopState) -> dict[str, Any]:
    tasks = []
    for t in s.tasks:
        d = t.to_dict()
        d.update(base=t.base, starts=t.starts, refresh_due=t.refresh_due, integration_failures=t.integration_failures,
                 solo=t.solo, started_at=t.started_at, ended_at=t.ended_at)  # fmt: skip
        tasks.append(d)
    if s.parallel:
        cursors = {str(i): cursor_view(c) for i, c in s.cursors.items() if s.tasks[i].status in ("active", "accepted")}
    else:
        cursors = {str(s.mt_index): cursor_view(s.cursor)} if s.task is not None and s.task.status == "active" else {}
    return {
        "tasks": tasks,
        "plan": [[t.mt_id, t.title, sorted(s.plan.needs(t.index)), t.pause, list(t.files)] for t in s.plan.tasks],
        "checks_of": [s.checks_of(i) for i in range(len(s.tasks))],
        "focus": s.mt_index if s.task is not None else None,
        "cursors": cursors,
        "total": s.total, "escalations": s.escalations, "drop_backs": s.drop_backs, "applied": s.applied,
        "integrations": s.integrations, "history": s.history,
        "final": s.final.to_dict() if s.final else None,
        "failures": [f.to_dict() for f in s.failures],
        "last_summary": s.last_summary, "last_trip": s.last_trip, "fatal_fix": s.fatal_fix,
        "usage": s.usage.to_dict(),
        "campaign": {"pending": s.pending, "plan_round": s.plan_round, "plan_attempt": s.plan_attempt,
                     "plan_error": s.plan_error, "replan_cause": s.replan_cause, "replans": s.replans,
                     "drift_q": s.drift_q, "drift_at": s.drift_at, "drift_checks": s.drift_checks,
                     "final_verified": s.final_verified},
        "live": s.live(),
    }  # fmt: skip
