"""The agent executor: `Executor: agent` MPs run through the agent run (run/loop.py); and
`[diagnose]`'s opinion on any MP that ended in ERROR (`advise`, consult.py)."""

from __future__ import annotations

from collections.abc import Mapping

from mp_engine.agent.consult import Suggestion, consult
from mp_engine.agent.plan.decompose import decompose
from mp_engine.agent.run.loop import AgentRun, Dispatch
from mp_engine.agent.settings import for_mp
from mp_engine.config.load import Config
from mp_engine.core.errors import InvalidMPError
from mp_engine.execute.base import ExecResult
from mp_engine.execute.steps import StepContext
from mp_engine.forge.repository import Repository
from mp_engine.inbox.mpfile import MicroProject
from mp_engine.record.diagnosis import Diagnosis


class AgentExecutor:
    name = "agent"
    works_on_repos = True  # an MP's `Repo:` runs in that repository's worktree (issue #41)

    def __init__(self, dispatch: Dispatch | None = None, repos: Mapping[str, Repository] | None = None):
        """`dispatch`: where attempts run when not here (the fleet, `[fleet]`); `repos`: the
        configured repositories (`[repos.NAME]`), opened once at start."""
        self.dispatch = dispatch
        self.repos = repos or {}

    def time_budget(self, config: Config) -> tuple[float, str]:
        return config.agent.wall_budget, "wall_budget"

    def validate(self, mp: MicroProject) -> None:
        if not decompose(mp).tasks:
            raise InvalidMPError(
                "the agent MP has no instructions: nothing but the header and checks",
                "Write what the agent should do under the title, as a paragraph or a numbered list.",
                mp_id=mp.mp_id,
            )

    def settings(self, config: Config, mp: MicroProject) -> Config:
        """`[agent]` with the MP's own settings (Max-Iterations:, Levels:, Wall-Budget:,
        Max-Cost-USD:) applied, within the operator's ceilings (settings.py)."""
        agent = for_mp(config.agent, mp)
        return config if agent is config.agent else config.model_copy(update={"agent": agent})

    def run(self, ctx: StepContext) -> ExecResult:
        return AgentRun(ctx, self.dispatch, self.repos).run()

    def advise(self, ctx: StepContext, diagnosis: Diagnosis, error_output: str) -> Suggestion | None:
        """`[diagnose] level`'s opinion on the failure of the MP `ctx` ran (any executor's),
        asked read-only in the sandbox; None when `[diagnose]` is off."""
        return consult(ctx, diagnosis, error_output)
