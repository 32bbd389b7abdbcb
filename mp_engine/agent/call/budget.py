"""The budgets across every MP and every fleet worker (issue #42): `[agent] daily_cost_usd`
and `monthly_cost_usd`, held to the engine's spend log (record/spend.py). They fail
closed: a call is not made once a budget is spent, nor when its prompt alone would cost
more than is left (at its model's `[agent.prices]` input price); it is a `budget` call,
which waits for the reset like a usage limit (or ends the run: `on_budget = "end"`). The
first such refusal of a day or month sends one alert (`budget_spent`).

Every call the engine makes or a worker of its fleet made is charged here, once, by its
key: what its CLI said it cost, or its tokens at the table's prices."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mp_engine.agent.call.invoke import Call, CallKind
from mp_engine.agent.call.prices import priced, prompt_cost
from mp_engine.config.agent import AgentConfig, AgentLevel
from mp_engine.record.spend import SPEND_FILE, Period, SpendLog, summary

SETTING = {"day": "daily_cost_usd", "month": "monthly_cost_usd"}
WORD = {"day": "today", "month": "this month"}


class Spending:
    """One engine's budgets and its spend log, shared by every call of a run (and every
    attempt the run sends to the fleet)."""

    def __init__(self, cfg: AgentConfig, log: SpendLog, *, mp_id: str = "", emit: Callable[..., None] | None = None):
        """`emit(name, **fields)`: an event (the one alert of a spent budget)."""
        self.cfg = cfg
        self.log = log
        self.mp_id = mp_id
        self.emit = emit

    @classmethod
    def at(
        cls, local_dir: Path, cfg: AgentConfig, *, mp_id: str = "", emit: Callable[..., None] | None = None
    ) -> Spending:
        return cls(cfg, SpendLog(local_dir / SPEND_FILE, cfg.budget_clock), mp_id=mp_id, emit=emit)

    @property
    def limits(self) -> dict[str, float | None]:
        return {"day": self.cfg.daily_cost_usd, "month": self.cfg.monthly_cost_usd}

    def refusal(self, level: AgentLevel, prompt: str, now: float | None = None) -> Call | None:
        """A `budget` call when `level`'s call with `prompt` may not be made; None when it may."""
        limits = self.limits
        if not any(v is not None for v in limits.values()):
            return None
        now = time.time() if now is None else now
        ask = prompt_cost(prompt, level, self.cfg.prices) or 0.0
        over: list[tuple[Period, float, float]] = []
        for name, (period, spent) in self.log.spent(now).items():
            limit = limits[name]
            if limit is not None and (spent >= limit or spent + ask > limit):
                over.append((period, spent, limit))
        if not over:
            return None
        period, spent, limit = max(over, key=lambda o: o[0].ends)  # the latest reset decides
        detail = (
            f"the agent calls of every MP cost ${spent:.4f} {WORD[period.name]} ({period.key}); the budget "
            f"(`[agent] {SETTING[period.name]}`) is ${limit:g}"
            + (f", and this call's prompt alone would cost about ${ask:.4f}" if spent < limit else "")
            + f"; it resets at {period.resets_at}"
        )
        if self.emit is not None and self.log.alert_once(period, now):
            self.emit(
                "budget_spent",
                period=period.name,
                key=period.key,
                spent_usd=spent,
                limit_usd=limit,
                resets_at=period.resets_at,
                on_budget=self.cfg.on_budget,
            )
        return Call(CallKind.BUDGET, detail=detail, resume_at=period.resets_at)

    def price(self, call: Call, level: AgentLevel) -> None:
        """`call`'s usage gains dollars from the table where its CLI gave none."""
        call.usage = priced(call.usage, level, self.cfg.prices)

    def charge(self, key: str, call: Call, level: AgentLevel, *, now: float | None = None) -> None:
        """Price `call` and count it against the budgets, once per `key`."""
        self.price(call, level)
        usd = cost_of(call.usage)
        if call.kind is CallKind.BUDGET or usd <= 0:
            return  # never made, or nothing to count (no usage, or a free local model)
        self.log.charge(key, usd, mp=self.mp_id, at=now)

    def summary(self, now: float | None = None) -> dict[str, Any]:
        """Per period: spent, the limit, what is left, when it resets (record/spend.py)."""
        return summary(self.log, self.limits, now)


def cost_of(usage: dict[str, Any] | None) -> float:
    return float((usage or {}).get("cost_usd") or 0.0)
