"""What tokens cost where a CLI reports tokens only (issue #42): `[agent.prices."MODEL"]`,
dollars per million tokens of each kind, for the model a level names (its `model`, else
its name). A CLI that says what a call cost (claude, aider) is believed; one that counts
tokens only (codex) is priced here, and its usage says so (`"priced": "table"`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mp_engine.agent.call.chain import model_id
from mp_engine.config.agent import AgentLevel, ModelPrice

MILLION = 1_000_000


def price_of(level: AgentLevel, prices: Mapping[str, ModelPrice]) -> ModelPrice | None:
    return prices.get(model_id(level)) or prices.get(level.name)


def priced(usage: dict[str, Any] | None, level: AgentLevel, prices: Mapping[str, ModelPrice]) -> dict[str, Any] | None:
    """`usage` with its dollars: as the CLI said, or from the table when it said none (and
    the table has the model); unchanged otherwise."""
    if usage is None or usage.get("cost_usd") is not None:
        return usage
    price = price_of(level, prices)
    if price is None:
        return usage
    cache_read = price.input if price.cache_read is None else price.cache_read
    cache_write = price.input if price.cache_write is None else price.cache_write
    usd = (
        int(usage.get("input") or 0) * price.input
        + int(usage.get("output") or 0) * price.output
        + int(usage.get("cache_read") or 0) * cache_read
        + int(usage.get("cache_write") or 0) * cache_write
    ) / MILLION
    return {**usage, "cost_usd": round(usd, 6), "priced": "table"}


def prompt_tokens(prompt: str) -> int:
    """The offline estimate the prompt's layout uses (prompt/context.py): ceil(bytes / 4)."""
    return -(-len(prompt.encode("utf-8")) // 4)


def prompt_cost(prompt: str, level: AgentLevel, prices: Mapping[str, ModelPrice]) -> float | None:
    """What sending `prompt` alone costs at `level`'s input price; None when the table has no price."""
    price = price_of(level, prices)
    return None if price is None else prompt_tokens(prompt) * price.input / MILLION
