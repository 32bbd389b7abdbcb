"""The state of an agent run after each record its ledger holds, as plain data: what
test_compat.py compares with what an earlier release computed from the same ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mp_engine.agent.plan.decompose import decompose, goal_of
from mp_engine.agent.run.resume import records
from mp_engine.agent.state.apply import apply, kind_of
from mp_engine.agent.state.model import RunState
from mp_engine.config.agent import AgentConfig
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
    state = RunState.begin(cfg, plan, progress["base"]["digest"], planned=planned, isolated=parallel)
    out: dict[str, Any] = {"parallel": parallel, "planned": planned, "views": [plain(view(state))]}
    for kind, rec in recs:
        effects = apply_one(state, kind, rec)
        effects_view = [[e.kind, e.name, e.event_id, e.fields] for e in (effects or []) if e.kind != "commit"]
        out["views"].append(plain({**view(state), "effects": effects_view}))
    return out


def plain(data: Any) -> Any:
    """A copy as JSON has it (the state's lists change as later records apply)."""
    return json.loads(json.dumps(data, default=str))


def apply_one(state: RunState, kind: str, rec: dict[str, Any]) -> list | None:
    return apply(state, kind_of(kind, rec), rec)


def cursor_view(c: Any) -> dict[str, Any]:
    return {
        "level": c.level,
        "fails": c.fails_at_level,
        "trend": list(c.trend),
        "streak": c.done_streak,
        "digest": c.last_digest,
        "passed": sorted(c.prev_passed),
        "breakers": c.breakers.to_dict(),
    }


def view(s: RunState) -> dict[str, Any]:
    c = s.campaign
    tasks = []
    for t in s.tasks:
        d = t.to_dict()
        d.update(
            base=t.base,
            starts=t.starts,
            refresh_due=t.refresh_due,
            integration_failures=t.integration_failures,
            solo=t.solo,
            started_at=t.started_at,
            ended_at=t.ended_at,
        )
        tasks.append(d)
    if s.isolated:
        cursors = {str(i): cursor_view(c) for i, c in s.cursors.items() if s.tasks[i].status in ("active", "accepted")}
    else:
        cursors = {str(s.focus): cursor_view(s.cur)} if s.task is not None and s.task.status == "active" else {}
    return {
        "tasks": tasks,
        "plan": [[t.mt_id, t.title, sorted(s.plan.needs(t.index)), t.pause, list(t.files)] for t in s.plan.tasks],
        "checks_of": [s.checks_of(i) for i in range(len(s.tasks))],
        "focus": s.focus if s.task is not None else None,
        "cursors": cursors,
        "total": s.total,
        "escalations": s.escalations,
        "drop_backs": s.drop_backs,
        "applied": s.applied,
        "integrations": s.integrations,
        "history": s.history,
        "final": s.final.to_dict() if s.final else None,
        "failures": [f.to_dict() for f in s.failures],
        "last_summary": s.last_summary,
        "last_trip": s.last_trip,
        "fatal_fix": s.fatal_fix,
        "usage": s.usage.to_dict(),
        "campaign": {
            "pending": c.pending,
            "plan_round": c.plan_round,
            "plan_attempt": c.plan_attempt,
            "plan_error": c.plan_error,
            "replan_cause": c.replan_cause,
            "replans": c.replans,
            "drift_q": c.drift_q,
            "drift_at": c.drift_at,
            "drift_checks": c.drift_checks,
            "final_verified": c.final_verified,
        },
        "live": s.live(),
    }
