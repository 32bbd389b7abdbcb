"""What the parts of one agent run share, built once and passed whole (issue #40): the
run's scope (its engine context, its policy, nonce, ledger steps, call limiter, learnings
file, memory snapshot and events) and a workspace's scope (where one task's parts work:
a directory, its repository-map cache, its fingerprint and where it started)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mp_engine.agent.evidence import Snapshot, Worktree

if TYPE_CHECKING:  # the scope is at the bottom of agent/: every room takes it whole
    from mp_engine.agent.call.budget import Spending
    from mp_engine.agent.call.limiter import CallLimiter
    from mp_engine.agent.run.steps import AgentSteps
    from mp_engine.config.agent import AgentConfig
    from mp_engine.core.workspace import Workspace
    from mp_engine.execute.steps import StepContext, TimeBudget
    from mp_engine.inbox.mpfile import MicroProject


@dataclass(frozen=True)
class RunScope:
    ctx: StepContext  # the engine's context of the run: workspace, configuration, ledger, events, stops, budget
    cfg: AgentConfig  # [agent], with the MP's own settings applied
    nonce: str  # marks the agent's claims and answers (claims.py)
    steps: AgentSteps
    limiter: CallLimiter
    learnings: Path  # agent/learnings.md of the run
    memory: str = ""  # the run's snapshot of SYSTEM/memory.md (memory/lessons.py)
    spending: Spending | None = (
        None  # the engine's budgets (call/budget.py); None on a fleet worker: the engine holds them
    )

    @property
    def mp(self) -> MicroProject:
        return self.ctx.mp

    @property
    def ws(self) -> Workspace:
        return self.ctx.ws

    @property
    def run_id(self) -> str:
        return self.ctx.run.run_id

    @property
    def run_dir(self) -> Path:
        return self.ctx.run.dir

    @property
    def run_rel(self) -> str:
        return self.ctx.ws.rel(self.ctx.run.dir)

    @property
    def budget(self) -> TimeBudget:
        return self.ctx.budget

    def emit(self, name: str, **fields: Any) -> None:
        """An event of this run (its MP and run ids added), as `EventLog.emit` takes it."""
        event_id = fields.pop("id", None)
        head = {"id": event_id} if event_id is not None else {}
        self.ctx.events.emit(name, **head, mp=self.mp.mp_id, run=self.run_id, **fields)

    def beside(self, **changes: Any) -> RunScope:
        """The scope of work that runs beside other work (tasks at once): its own stop
        events and a view of the budget that the scheduler charges (`changes` of the
        StepContext)."""
        return replace(self, ctx=replace(self.ctx, **changes))


@dataclass(frozen=True)
class WorkspaceScope:
    workdir: Path
    map_cache: Path  # the repository map's cache (prompt/repomap.py)
    worktree: Worktree  # its fingerprint and diff
    base: Snapshot  # what it held when its work started

    @classmethod
    def at(cls, workdir: Path, map_cache: Path, base: Snapshot) -> WorkspaceScope:
        return cls(workdir, map_cache, Worktree(workdir), base)
