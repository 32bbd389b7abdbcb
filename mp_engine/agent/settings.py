"""An agent MP's own settings (docs/AGENT.md, "Per-MP settings"): its headers
`Max-Iterations:`, `Levels:`, `Wall-Budget:`, `Max-Cost-USD:` and `Plan: review` over `[agent]`, for this
MP only. A header may lower a limit the operator marked as a ceiling (`[agent] ceilings`),
never raise it; `Levels:` keeps a subset of the chain, in the chain's order. What cannot
apply is an `InvalidMPError` with the fix, so the MP is refused before it starts."""

from __future__ import annotations

from typing import Any

from mp_engine.config.agent import AgentConfig
from mp_engine.core.errors import InvalidMPError
from mp_engine.inbox.mpfile import MicroProject

# header -> the [agent] setting it sets
LIMITS = {"Max-Iterations": "max_iterations", "Wall-Budget": "wall_budget", "Max-Cost-USD": "max_cost_usd"}


def for_mp(cfg: AgentConfig, mp: MicroProject) -> AgentConfig:
    """`cfg` as this MP runs with it."""
    update: dict[str, Any] = {}
    for header, key in LIMITS.items():
        if header not in mp.headers:
            continue
        value, limit = mp.headers[header], getattr(cfg, key)
        if key in cfg.ceilings and limit is not None and value > limit:
            raise InvalidMPError(
                f"`{header}: {value:g}` is above the operator's ceiling, `[agent] {key} = {limit:g}`",
                f"Give `{header}: {limit:g}` or less (the operator marked {key} as a ceiling in `[agent] ceilings`).",
                mp_id=mp.mp_id,
            )
        update[key] = value
    if "Levels" in mp.headers:
        update["levels"] = _levels(cfg, mp)
    if mp.headers.get("Plan") == "review":  # planned, and the plan waits for a person (issue #42)
        update["plan_review"] = True
    return cfg.model_copy(update=update) if update else cfg


def _levels(cfg: AgentConfig, mp: MicroProject) -> tuple[Any, ...]:
    names: tuple[str, ...] = mp.headers["Levels"]
    chain = [lv.name for lv in cfg.levels]
    wanted = [n for n in chain if n in names]  # the chain's order
    ordered = ", ".join(wanted)
    unknown = [n for n in names if n not in chain]
    if unknown:
        raise InvalidMPError(
            f"`Levels:` names {', '.join(unknown)}, which the agent chain does not have (it has {', '.join(chain) or 'no level'})",
            f"Name levels of the chain, in its order, like `Levels: {', '.join(chain[:2]) or 'a level'}`.",
            mp_id=mp.mp_id,
        )
    if list(names) != wanted:
        raise InvalidMPError(
            f"`Levels: {', '.join(names)}` is not in the chain's order ({', '.join(chain)})",
            f"Write `Levels: {ordered}`: the chain escalates in its own order.",
            mp_id=mp.mp_id,
        )
    levels = tuple(lv for lv in cfg.levels if lv.name in names)
    if all(lv.hard_gate for lv in levels):
        raise InvalidMPError(
            f"`Levels: {ordered}` keeps no agent level: a hard gate cannot do the work",
            "Name at least one agent level before the gate.",
            mp_id=mp.mp_id,
        )
    return levels
