"""The collaborators that work in one workspace (the run's worktree, or a task's own): who
calls the agent there, runs the checks there, records what it left and builds its prompts.
Built whole from the run's scope and the workspace's."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mp_engine.agent.call.caller import Caller
from mp_engine.agent.judge.checks import Checker
from mp_engine.agent.judge.protected import Protected
from mp_engine.agent.prompt.prompter import Prompter
from mp_engine.agent.run.recorder import Recorder
from mp_engine.agent.scope import RunScope, WorkspaceScope
from mp_engine.core.workspace import Workspace
from mp_engine.execute.sandbox import for_checks
from mp_engine.execute.steps import StepContext


def checks_in(ctx: StepContext, workdir: Path, **changes: Any) -> StepContext:
    """The context the checks run in: `workdir`, inside the sandbox when it is on."""
    box = for_checks(ctx.config.agent, workdir=workdir, engine_root=ctx.ws.root, steps_dir=ctx.run.steps_dir)
    return replace(ctx, ws=Workspace(workdir), sandbox=box, **changes)


@dataclass(frozen=True)
class WorkspaceParts:
    run: RunScope
    place: WorkspaceScope
    caller: Caller
    checker: Checker
    recorder: Recorder
    prompter: Prompter
    protected: Protected | None = None  # the files that judge the work, as of the base (issue #42)


def workspace_parts(
    run: RunScope, place: WorkspaceScope, check_slots: threading.Semaphore | None = None
) -> WorkspaceParts:
    """`check_slots`: checks that may run at once across the run's workspaces."""
    # Checks of an iteration whose agent call finished run to the end on a first stop
    # signal (the iteration is "the current step"); a second signal still kills them.
    checker = Checker(checks_in(run.ctx, place.workdir, stop=threading.Event()), run.mp, check_slots)
    guard = protected(run, place)
    return WorkspaceParts(
        run, place, Caller(run, place.workdir), checker, Recorder(run, place), Prompter(run, place), guard
    )


def protected(run: RunScope, place: WorkspaceScope) -> Protected | None:
    """What the agent may not change in this workspace (judge/protected.py), read from its
    base commit; None without git (nothing to restore from)."""
    if not place.base.head or not place.worktree.is_git:
        return None
    return Protected.at(place.workdir, place.base.head, run.mp, run.cfg.protected_paths)
