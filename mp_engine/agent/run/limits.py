"""What the result says of the files that judge the work and of the money (issue #42): the
protected files the agent changed (each put back, each a failed iteration), and the engine's
budgets as the run ended (spent today and this month, the limits, when they reset)."""

from __future__ import annotations

from typing import Any

from mp_engine.agent.call.budget import Spending
from mp_engine.agent.state.model import RunState


def protected(state: RunState) -> dict[str, Any] | None:
    """`protected` of RESULT_last.json: every iteration that changed a protected file, or None."""
    hits = [
        {"mt": rec["mt"], "iteration": rec["iteration"], "paths": rec["protected"]}
        for task in state.tasks
        for rec in task.records
        if rec.get("protected")
    ]
    if not hits:
        return None
    return {"paths": sorted({p for h in hits for p in h["paths"]}), "iterations": hits}


def budget(spending: Spending | None, state: RunState) -> dict[str, Any] | None:
    """`budget` of RESULT_last.json when `[agent] daily_cost_usd` or `monthly_cost_usd` is set."""
    if spending is None or all(v is None for v in spending.limits.values()):
        return None
    return {**spending.summary(), "mp_cost_usd": state.usage.cost, "on_budget": spending.cfg.on_budget}


def sections(found: dict[str, Any] | None, spent: dict[str, Any] | None) -> list[dict[str, str]]:
    """The result's sections of the two (none when there is nothing to say)."""
    out = []
    if found is not None:
        lines = [f"- {h['mt']} iteration {h['iteration']}: {', '.join(h['paths'])}" for h in found["iterations"]]
        body = (
            "The agent changed files that judge the work; each was restored from the base, the checks ran on "
            "that copy, and the iteration failed (`Allow-Changes:` in the MP would allow it):\n" + "\n".join(lines)
        )
        out.append({"title": "Protected files", "body": body})
    if spent is not None:
        lines = [
            f"- {name}: ${p['spent_usd']:.4f} of ${p['limit_usd']:g}, resets {p['resets_at']}"
            for name, p in spent.items()
            if isinstance(p, dict) and p.get("limit_usd") is not None
        ]
        out.append({"title": "Budgets", "body": "Every MP's agent calls together:\n" + "\n".join(lines)})
    return out
