"""The escalation chain: ordered levels from `[agent] levels`, and argv rendering.

Level 0 is tried first; after `fail_threshold` failed iterations of a micro-task at a
level the next level takes over; a `hard_gate` level (last only) means "stop and wait
for a person". After a micro-task succeeds, the next one starts again at level 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mp_engine.config.agent import AgentConfig, AgentLevel

PLACEHOLDERS = ("prompt", "prompt_file", "workspace", "mt_id", "evidence_dir", "ignore_file", "max_turns")


def render_argv(level: AgentLevel, values: Mapping[str, str]) -> list[str]:
    """The level's argv with `{prompt}`, `{prompt_file}`, `{workspace}`, `{mt_id}`,
    `{evidence_dir}` (the iteration's evidence directory) and `{ignore_file}` (what is not
    the agent's work, in gitignore syntax: workspace.NOT_WORK) replaced. Plain replacement,
    not `str.format`: other braces (JSON, shell) stay as written. A level's `max_turns`
    (issue #42) goes where argv says `{max_turns}`, else to claude as `--max-turns N`."""
    out = []
    for arg in level.argv:
        for name in PLACEHOLDERS:
            arg = arg.replace(
                "{" + name + "}", str(level.max_turns or "") if name == "max_turns" else values.get(name, "")
            )
        out.append(arg)
    if level.max_turns is not None and not any("{max_turns}" in a for a in level.argv):
        out[1:1] = ["--max-turns", str(level.max_turns)]
    return out


def model_id(level: AgentLevel) -> str:
    return level.model or level.name


def describe(levels: Sequence[AgentLevel], index: int) -> str:
    """`level 1 (codex)` for messages and the status line."""
    return f"level {index} ({levels[index].name})" if 0 <= index < len(levels) else f"level {index}"


def runnable(levels: Sequence[AgentLevel]) -> list[AgentLevel]:
    """The levels that call an agent (the chain without its hard gate)."""
    return [lv for lv in levels if not lv.hard_gate]


def chain_for(cfg: AgentConfig, domain: str | None) -> tuple[AgentLevel, ...]:
    """The escalation chain of a micro-task: its domain's route (`[[agent.routes]]`), or
    `[agent] levels` when it has no domain or no route names it."""
    for route in cfg.routes:
        if domain is not None and route.domain.lower() == domain.lower():
            return route.levels
    return cfg.levels
