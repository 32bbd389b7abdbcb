"""The collaborators that work in one workspace (the run's worktree; with parallel tasks,
each task's own): who calls the agent there, runs the checks there, records what it
left and builds its prompts. Built whole, with explicit arguments, from what the run
shares (its ledger steps, call limiter, budget, learnings file and event emitter)."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from mp_engine.agent.call.caller import Caller
from mp_engine.agent.call.limiter import CallLimiter
from mp_engine.agent.evidence import Snapshot, Worktree
from mp_engine.agent.judge.checks import Checker
from mp_engine.agent.memory.lessons import snapshot
from mp_engine.agent.prompt.prompter import Prompter
from mp_engine.agent.run.recorder import Recorder
from mp_engine.agent.run.steps import AgentSteps
from mp_engine.agent.state.model import Emit
from mp_engine.core.workspace import Workspace
from mp_engine.execute.sandbox import for_checks
from mp_engine.execute.steps import StepContext


def checks_in(ctx: StepContext, workdir: Path, **changes: Any) -> StepContext:
    """The context the checks run in: `workdir`, inside the sandbox when it is on."""
    box = for_checks(ctx.config.agent, workdir=workdir, engine_root=ctx.ws.root, steps_dir=ctx.run.steps_dir)
    return replace(ctx, ws=Workspace(workdir), sandbox=box, **changes)


class WorkspaceParts(NamedTuple):
    caller: Caller
    checker: Checker
    recorder: Recorder
    prompter: Prompter


def workspace_parts(
    ctx: StepContext,
    *,
    workdir: Path,
    map_cache: Path,
    worktree: Worktree,
    base: Snapshot,
    nonce: str,
    limiter: CallLimiter,
    steps: AgentSteps,
    learnings_path: Path,
    emit: Emit,
    check_slots: threading.Semaphore | None = None,
) -> WorkspaceParts:
    cfg, run_dir = ctx.config.agent, ctx.run.dir
    caller = Caller(
        cfg,
        mp_id=ctx.mp.mp_id,
        run_dir=run_dir,
        workdir=workdir,
        limiter=limiter,
        budget=ctx.budget,
        stop=ctx.stop,
        stop_now=ctx.stop_now,
        kill_grace=ctx.config.execution.kill_grace,
        emit=ctx.events.emit,
        engine_root=ctx.ws.root,
    )
    # Checks of an iteration whose agent call finished run to the end on a first stop
    # signal (the iteration is "the current step"); a second signal still kills them.
    checker = Checker(checks_in(ctx, workdir, stop=threading.Event()), ctx.mp, check_slots)
    recorder = Recorder(
        cfg,
        mp_id=ctx.mp.mp_id,
        run_dir=run_dir,
        steps=steps,
        budget=ctx.budget,
        worktree=worktree,
        base=base,
        learnings_path=learnings_path,
        emit=emit,
    )
    prompter = Prompter(
        cfg,
        mp=ctx.mp,
        nonce=nonce,
        workdir=workdir,
        map_cache=map_cache,
        worktree=worktree,
        base=base,
        learnings_path=learnings_path,
        steps_dir=ctx.run.steps_dir,
        budget=ctx.budget,
        memory=snapshot(ctx.ws, run_dir, cfg.memory),
    )
    return WorkspaceParts(caller, checker, recorder, prompter)
