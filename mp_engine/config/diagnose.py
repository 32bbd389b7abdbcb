"""`[diagnose]`: an agent's opinion on a failure, beside the engine's own (issue #34)."""

from __future__ import annotations

from pydantic import Field

from mp_engine.config.section import Section


class DiagnoseConfig(Section):
    """`[diagnose]`: off unless `level` names one of `[agent] levels`. When an MP ends in
    ERROR, that level is asked, read-only inside the OS sandbox and within `timeout`
    seconds, for a root cause and one fix; the result shows its answer as the agent's
    suggestion, apart from the engine's facts (docs/AGENT.md, Diagnoses)."""

    level: str = Field("", description="an [agent] level's name; empty: never ask an agent")
    timeout: float = Field(60.0, gt=0, le=600, description="seconds the agent may take to answer")
