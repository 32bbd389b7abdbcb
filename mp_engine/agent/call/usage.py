"""What an MP's agent calls cost (issue #32): tokens and dollars as each CLI reported them
(structured.py), summed from the run's records, per task, per level and for the whole MP.
The records are the truth (each iteration's `call.usage`, a planning round's or drift
check's `usage`); this is their sum, rebuilt by replay like the rest of the state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

TokenKind = Literal["input", "output", "cache_read", "cache_write"]
KINDS: tuple[TokenKind, ...] = ("input", "output", "cache_read", "cache_write")


class Tally(TypedDict):
    """One sum of usage: tokens of each kind, dollars, calls and the calls that were priced."""

    input: int
    output: int
    cache_read: int
    cache_write: int
    cost_usd: float
    calls: int
    priced: int


def used(rec: dict[str, Any]) -> dict[str, Any] | None:
    """The usage a record carries, or None."""
    u = rec.get("usage") or (rec.get("call") or {}).get("usage")
    return u if isinstance(u, dict) else None


class Usage:
    def __init__(self) -> None:
        self.total = self._zero()
        self.by_level: dict[str, Tally] = {}
        self.by_task: dict[str, Tally] = {}

    @staticmethod
    def _zero() -> Tally:
        return {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "cost_usd": 0.0, "calls": 0, "priced": 0}

    def add(self, rec: dict[str, Any], *, task: str, level: str) -> None:
        u = used(rec)
        if u is None:
            return
        for into in (
            self.total,
            self.by_level.setdefault(level, self._zero()),
            self.by_task.setdefault(task, self._zero()),
        ):
            for k in KINDS:
                into[k] += int(u.get(k) or 0)
            into["calls"] += 1
            if u.get("cost_usd") is not None:
                into["cost_usd"] = round(into["cost_usd"] + float(u["cost_usd"]), 6)
                into["priced"] += 1

    @property
    def cost(self) -> float:
        return self.total["cost_usd"]

    def to_dict(self) -> dict[str, Any]:
        """`priced`: the calls whose CLI said what they cost (the others count tokens only)."""
        return {**self.total, "by_level": self.by_level, "by_task": self.by_task}

    def line(self) -> str:
        return describe(self.total)


def describe(t: Mapping[str, Any]) -> str:
    """The one line a person reads (the result, `status`): tokens, calls and, when priced, dollars."""
    cost = f", ${t['cost_usd']:.4f}" + (
        "" if t["priced"] == t["calls"] else f" ({t['priced']} of {t['calls']} calls priced)"
    )
    return f"{t['input']} input and {t['output']} output tokens in {t['calls']} calls{cost if t['priced'] else ''}"
