"""What tokens cost where a CLI reports tokens only (mp_engine/agent/call/prices.py)."""

from __future__ import annotations

from mp_engine.agent.call.prices import priced, prompt_cost, prompt_tokens
from mp_engine.config.agent import AgentLevel, ModelPrice

CODEX = AgentLevel(name="codex", argv=["codex", "-"], stdin=True, model="gpt-5")
PRICES = {"gpt-5": ModelPrice(input=1.25, output=10.0, cache_read=0.125)}


def test_tokens_are_priced_from_the_table_by_the_level_s_model():
    usage = {"input": 2_000_000, "output": 100_000, "cache_read": 1_000_000, "cache_write": 0, "cost_usd": None}
    got = priced(usage, CODEX, PRICES)
    assert got == {**usage, "cost_usd": 2.5 + 1.0 + 0.125, "priced": "table"}


def test_what_the_cli_said_it_cost_is_kept_and_an_unknown_model_stays_unpriced():
    said = {"input": 10, "output": 1, "cache_read": 0, "cache_write": 0, "cost_usd": 0.5}
    assert priced(said, CODEX, PRICES) is said
    other = AgentLevel(name="local", argv=["x", "{prompt}"])
    assert priced({**said, "cost_usd": None}, other, PRICES)["cost_usd"] is None
    assert priced(None, CODEX, PRICES) is None


def test_a_prompt_is_priced_at_the_input_price():
    assert prompt_tokens("abcde") == 2
    assert prompt_cost("x" * 4_000_000, CODEX, PRICES) == 1.25
    assert prompt_cost("x", AgentLevel(name="local", argv=["x", "{prompt}"]), PRICES) is None
