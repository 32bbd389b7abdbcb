"""A run's state as the tests build it: `begin(cfg, plan, base, planned, isolated)`."""

from __future__ import annotations

from mp_engine.agent.plan.decompose import Plan
from mp_engine.agent.state.model import RunState
from mp_engine.config.agent import AgentConfig


def begin(cfg: AgentConfig, plan: Plan, base: str, planned: bool = False, isolated: bool = False) -> RunState:
    return RunState.begin(cfg, plan, base, planned=planned, isolated=isolated)
