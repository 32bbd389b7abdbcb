"""The engine's own verdict: the MP's checks (its Validate blocks), run by the engine in
the workspace the agent worked in, as ledger steps of their own. An iteration runs the
checks that accept its micro-task (`MT-001_iter-002_check-001`); a drift check runs the
ones it names (`DRIFT-1_check-001`)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

from mp_engine.execute.steps import StepContext, run_block
from mp_engine.inbox.mpfile import Block, MicroProject


@dataclass(frozen=True)
class IterationCheck(Block):
    """A Validate check as run in one iteration: its own ledger step and output files."""

    prefix: str = ""

    @property
    def check_id(self) -> str:
        return super().step_id

    @property
    def step_id(self) -> str:
        return f"{self.prefix}_{self.check_id}"

    @property
    def script_name(self) -> str:  # one script per check, shared by the iterations
        return self.check_id


CheckRun = tuple[IterationCheck, bool, "int | None"]  # the check, passed, its exit code


def iter_check(block: Block, prefix: str) -> IterationCheck:
    return IterationCheck(**{**vars(block), "prefix": prefix})  # every field of the block, whatever it gains


class Checker:
    """Runs checks in one workspace (`ctx.ws`: a task's worktree). Its `ctx` has a stop
    event of its own: checks whose agent call finished run to the end on a first stop
    signal (the iteration is "the current step"); a second signal still kills them."""

    def __init__(self, ctx: StepContext, mp: MicroProject, slots: threading.Semaphore | None = None):
        """`slots`: checks that may run at once across the run's workspaces
        (`[agent] max_parallel_checks`), when tasks run at once."""
        self.ctx = ctx
        self.mp = mp
        self.slots = slots

    def run(self, indices: Iterable[int], prefix: str) -> list[CheckRun] | None:
        """Each check `indices` names (positions in the MP's checks), as ledger steps under
        `prefix`. None when a second stop signal or a cancel interrupted them."""
        out = []
        for k in indices:
            chk = iter_check(self.mp.checks[k], prefix)
            if self.slots is None:
                run = run_block(self.ctx, chk)
            else:
                with self.slots:
                    run = run_block(self.ctx, chk)
            if run.interrupted or run.cancelled:
                return None
            out.append((chk, run.ok, run.report.exit_code))
        return out
