"""Parallel tasks (issue #29): an agent MP's independent micro-tasks run at once, each in
its own worktree (taskbranch.py), integrated onto `mp/<MP-id>` one at a time (integrator.py).

The scheduler is the one thread that decides and records. Each turn it starts what may
start (`LoopState.startable`, `[agent] max_parallel`, each level's `max_parallel`), hands
each attempt (prompt and ledger step ready) to its `Runner`: a worker thread here, or a
worker of the fleet; records what comes back in the order it applies it (`seq`: replay
follows it), integrates accepted tasks one at a time, and runs a planning round or a drift
check when none is in flight. A usage limit holds that level's tasks until its reset; a
stop lets what runs finish; a cancel or a second stop stops every task's process group.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Any

from mp_engine.agent.call.caller import why_fatal
from mp_engine.agent.call.chain import describe
from mp_engine.agent.call.limiter import CallLimiter
from mp_engine.agent.evidence import IterationEvidence, Snapshot, Worktree
from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.judge.checks import Checker
from mp_engine.agent.memory.distill import distill
from mp_engine.agent.run.attempt import Attempt, Local, Outcome, Runner, record
from mp_engine.agent.run.integrator import Integrator
from mp_engine.agent.run.parts import WorkspaceParts, checks_in, workspace_parts
from mp_engine.agent.run.publisher import Publisher, iso_utc, running_task, where
from mp_engine.agent.run.steps import AgentSteps, iteration_step
from mp_engine.agent.run.workbranch import WorkBranch
from mp_engine.agent.run.worktrees import TaskWorktrees
from mp_engine.agent.state.loopstate import LoopState
from mp_engine.agent.state.model import Effect, Emit
from mp_engine.config import AgentConfig
from mp_engine.core.clock import now_iso
from mp_engine.execute.base import ExecResult
from mp_engine.execute.steps import StepContext
from mp_engine.inbox.mpfile import MicroProject

TURN = 0.1  # seconds the scheduler waits for an attempt before it looks at stops again
SideStep = Callable[[LoopState], ExecResult | None]  # a planning round or a drift check
Dispatch = Callable[[StepContext, TaskWorktrees], Runner]  # where a run's attempts run (the fleet)


def parallel_limit(cfg: AgentConfig, mp: MicroProject) -> int:
    """Tasks of this MP at once: `[agent] max_parallel`, which a `Max-Parallel:` header may
    lower (never raise)."""
    return max(1, min(cfg.max_parallel, int(mp.headers.get("Max-Parallel", cfg.max_parallel))))


@dataclass
class Flight:
    a: Attempt
    parts: WorkspaceParts


class Scheduler:
    def __init__(
        self,
        ctx: StepContext,
        *,
        limit: int,
        work: WorkBranch,
        steps: AgentSteps,
        publisher: Publisher,
        nonce: str,
        limiter: CallLimiter,
        learnings_path: Any,
        emit: Emit,
        side_step: SideStep,
        dispatch: Dispatch | None = None,  # default: the attempts run in this engine's threads
    ):
        self.ctx = ctx
        self.cfg = ctx.config.agent
        self.limit = limit
        self.steps = steps
        self.publisher = publisher
        self.trees = TaskWorktrees(work)
        self.runner: Runner = dispatch(ctx, self.trees) if dispatch else Local()
        self.nonce = nonce
        self.limiter = limiter
        self.learnings_path = learnings_path
        self.emit = emit
        self.side_step = side_step
        # Attempts stop when the run stops them (its end, a cancel, a second signal).
        self.halt = threading.Event()
        self.task_ctx = replace(ctx, stop_now=self.halt, budget=ctx.budget.shared())
        self.check_slots = threading.Semaphore(self.cfg.max_parallel_checks or os.cpu_count() or 1)
        # The integration's checks run here, stopped by a cancel or a second signal at once.
        integration = checks_in(ctx, work.path, stop=threading.Event(), budget=ctx.budget.shared())
        self.integrator = Integrator(work, Checker(integration, ctx.mp, self.check_slots))
        self.parts: dict[int, WorkspaceParts] = {}
        self.flights: dict[Future[Outcome], Flight] = {}
        self.held: dict[str, str] = {}  # level name -> resume_at of its usage limit
        self.held_why = ""
        self.next_publish = 0.0  # the snapshot is rewritten when tasks start or end, or each second

    # -- the loop ----------------------------------------------------------------------

    def run(self, state: LoopState) -> ExecResult | None:
        """Until the run ends (None: `state.final` is set) or pauses (the ExecResult)."""
        self._recover(state)
        pool = ThreadPoolExecutor(max_workers=self.limit, thread_name_prefix="mp-task")
        last = time.monotonic()
        try:
            while True:
                if self.ctx.stop_now.is_set():
                    self.halt.set()
                self._collect(state, block=False)
                now = time.monotonic()
                self.ctx.budget.charge(now - last)  # the wall time of the run, shared by its tasks
                last = now
                if state.final is not None:
                    self._stop_all(state)
                    return None
                if self.ctx.stop.is_set() or self.ctx.stop_now.is_set():
                    if self.flights:
                        self._collect(state, block=True)
                        continue
                    return self.publisher.pause(
                        state, "stop", "a stop signal (SIGTERM/SIGINT); the loop resumes when the engine restarts"
                    )
                if self._guard(state) or self._integrate(state):
                    continue
                if state.pending is not None:  # a planning round or a drift check, alone
                    if self.flights:
                        self._collect(state, block=True)
                        continue
                    paused = self.side_step(state)
                    last = time.monotonic()  # its calls and checks charged their own time
                    if paused is not None:
                        return paused
                    continue
                self._launch(state, pool)
                if self.flights:
                    if time.monotonic() >= self.next_publish:
                        self._publish(state)
                    self._collect(state, block=True)
                    continue
                waiting = self._waiting(state)
                if waiting is not None:
                    return waiting
                self._act(state, state.settle())  # a final drift check may come first
                if state.final is None and state.pending is None:
                    raise RuntimeError(f"parallel run stuck: {[(t.mt_id, t.status) for t in state.tasks]}")
        finally:
            self.halt.set()  # whatever still runs stops now (its results are not recorded)
            pool.shutdown(wait=True)
            self.runner.close()

    def _recover(self, state: LoopState) -> None:
        """After a restart: an integration the crash cut short is undone (it runs again)."""
        pending = {
            f"{self.ctx.mp.mp_id} {t.mt_id}: {state.plan.tasks[i].title}": t.mt_id
            for i, t in enumerate(state.tasks)
            if t.status == "accepted"
        }
        undone = self.integrator.recover(pending)
        if undone is not None:
            self.emit("micro_task_integration_undone", "MPE-MT-UNDONE", mt=undone, reason="the engine restarted")

    def _guard(self, state: LoopState) -> bool:
        """SYSTEM/STOP, the budget and the iteration cap end the run (True)."""
        ctx, budget = self.ctx, self.ctx.budget
        if ctx.ws.stop_file.exists():
            state.end(
                cert.BACKPRESSURE, "stop_file", f"{ctx.ws.rel(ctx.ws.stop_file)} was found; the loop stopped as asked."
            )
        elif budget.remaining() <= 0:
            state.end(
                cert.TIMEOUT,
                "wall_budget",
                f"The {budget.total:g} s budget ({budget.describe}) was spent before every micro-task passed.",
            )
        elif state.total >= self.cfg.max_iterations:
            state.end(
                cert.TIMEOUT,
                "max_iterations",
                f"All {self.cfg.max_iterations} iterations (`[agent] max_iterations`) were spent before every "
                "micro-task passed.",
            )
        return state.final is not None

    def _waiting(self, state: LoopState) -> ExecResult | None:
        """Nothing in flight and nothing may start: a usage limit or the hourly call limit
        holds what is left; the MP waits (`resume_at`), or None."""
        if self.held:
            resume_at = min(self.held.values())
            return self.publisher.wait(state, "usage_limit", self.held_why or "the provider's usage limit", resume_at)
        slot = self.limiter.next_slot(time.time())
        if slot is not None:
            why = f"{self.cfg.calls_per_hour} agent calls in the last hour (`[agent] calls_per_hour`)"
            return self.publisher.wait(state, "rate_limit", why, iso_utc(slot))
        return None

    # -- starting ----------------------------------------------------------------------

    def _launch(self, state: LoopState, pool: ThreadPoolExecutor) -> None:
        """Next attempts of live tasks (plan order), then new tasks, within the limits."""
        flying = {f.a.mt_index for f in self.flights.values()}
        for i in state.live():
            if i not in flying and state.tasks[i].status == "active" and self._may_call(state, i):
                self._attempt(state, i, pool)
        # One worktree at a time: `git worktree add` reads the other worktrees' records,
        # and two at once fail ("failed to read .git/worktrees/<name>/commondir").
        for j in state.startable(set(state.live()))[: max(0, self.limit - len(state.live()))]:
            self._start(state, j, restart=False)
            if self._may_call(state, j):
                self._attempt(state, j, pool)

    def _may_call(self, state: LoopState, i: int) -> bool:
        task = state.tasks[i]
        if task.solo and len(state.live()) > 1:
            return False  # it waits until no other task runs
        level = state.chains[i][state.cursors[i].level]
        if level.name in self.held or len(self.flights) >= self.limit:
            return False
        if level.max_parallel is not None:
            running = sum(1 for f in self.flights.values() if f.a.level.name == level.name)
            if running >= level.max_parallel:
                return False
        return self.limiter.next_slot(time.time()) is None

    def _start(self, state: LoopState, i: int, *, restart: bool) -> None:
        """The task's worktree from the tip of `mp/<MP-id>` (fresh, or refreshed), recorded."""
        task = state.tasks[i]
        base = self.trees.refresh(task.mt_id) if restart else self.trees.start(task.mt_id)
        tree = Worktree(self.trees.path(task.mt_id))
        n = task.starts + 1
        step = self.steps.start(f"{task.mt_id}_start-{n}", "start", task.mt_id, str(n), base)
        rec = {
            "mt": task.mt_id,
            "mt_index": i,
            "base": base,
            "digest": tree.snapshot().digest,
            "worktree": self.ctx.ws.rel(self.trees.path(task.mt_id)),
            "restart": restart,
            "at": now_iso(),
            "seq": state.applied + 1,
        }
        self.steps.finish(step, rec, ok=True)
        self._act(state, state.apply_start(rec))
        self.parts[i] = self._parts_in(task.mt_id, Snapshot(base, {}))

    def _parts(self, state: LoopState, i: int) -> WorkspaceParts:
        """A live task's parts: after a restart of the engine, in its worktree as the crash
        left it (the work it had goes on, as a sequential run's does)."""
        task = state.tasks[i]
        if task.refresh_due:  # a crash came between its failed integration and the refresh
            self._start(state, i, restart=True)
        elif i not in self.parts:
            self.trees.start(task.mt_id)
            self.parts[i] = self._parts_in(task.mt_id, Snapshot(task.base, {}))
        return self.parts[i]

    def _parts_in(self, mt_id: str, base: Snapshot) -> WorkspaceParts:
        return workspace_parts(
            self.task_ctx,
            workdir=self.trees.path(mt_id),
            map_cache=self.trees.map_cache(mt_id),
            worktree=Worktree(self.trees.path(mt_id)),
            base=base,
            nonce=self.nonce,
            limiter=self.limiter,
            steps=self.steps,
            learnings_path=self.learnings_path,
            emit=self.emit,
            check_slots=self.check_slots,
        )

    def _attempt(self, state: LoopState, i: int, pool: ThreadPoolExecutor) -> None:
        """Prepare the task's next iteration here and hand its work to a worker thread."""
        parts = self._parts(state, i)
        state.mt_index = i
        task = state.plan.tasks[i]
        level = state.levels[state.level]
        iteration = state.next_iteration
        ev = IterationEvidence(self.ctx.run.dir, task.mt_id, iteration)
        step_id = iteration_step(task.mt_id, iteration)
        text = self.steps.prompt_once(ev, step_id, lambda: parts.prompter.worker(state, i, iteration, level))
        sha = hashlib.sha256(text.encode()).hexdigest()
        step = self.steps.start(step_id, "agent", task.mt_id, str(iteration), str(state.level), sha)
        self.emit("micro_task_iteration_started", "FR-EVT-MT-002", **where(state), agent=level.name)
        a = Attempt(task.mt_id, i, iteration, level, state.level, step, ev, state.checks_of(i))
        self.flights[pool.submit(self.runner, parts, self.steps, a, self.nonce)] = Flight(a, parts)
        self.next_publish = 0.0

    # -- what comes back ---------------------------------------------------------------

    def _collect(self, state: LoopState, *, block: bool) -> None:
        """Record and apply the attempts that finished, in plan order."""
        if not self.flights:
            return
        done, _ = wait(list(self.flights), timeout=TURN if block else 0, return_when=FIRST_COMPLETED)
        for fut in sorted(done, key=lambda f: self.flights[f].a.mt_index or 0):
            flight = self.flights.pop(fut)
            self._settle(state, flight, fut.result())
            self.next_publish = 0.0

    def _settle(self, state: LoopState, flight: Flight, out: Outcome) -> None:
        a = flight.a
        call = out.call
        if state.final is not None or out.checks_interrupted or call.kind == "interrupted":
            self.steps.release(a.step)  # it runs again (or never: the run ended)
            return
        state.mt_index = a.mt_index
        if call.kind == "usage_limit":
            self.steps.release(a.step)
            assert call.resume_at is not None
            self.held[a.level.name] = max(self.held.get(a.level.name, call.resume_at), call.resume_at)
            self.held_why = call.detail or "the provider's usage limit"
            self.emit("micro_task_pause_requested", "FR-EVT-MT-007", **where(state), kind="usage_limit",
                      reason=self.held_why, resume_at=call.resume_at, level_name=a.level.name)  # fmt: skip
            return
        if call.ends_run:
            who = describe(state.levels, state.level)
            why = why_fatal(call, a.level, who, "[agent] levels", self.ctx.mp.mp_id, self.cfg.transient_retries)
            rec = flight.parts.recorder.fatal(
                a.step, a.ev, call, why, mt_id=a.mt_id, mt_index=a.mt_index, iteration=a.iteration,
                level_index=a.level_index, seq=state.applied + 1,
            )  # fmt: skip
            state.apply_fatal(rec)
            return
        self._act(state, state.apply(record(flight.parts, a, out, state.applied + 1)))

    def _act(self, state: LoopState, effects: list[Effect]) -> None:
        for e in effects:
            if e.kind == "event":
                self.emit(e.name, e.event_id, **e.fields)
            elif e.kind == "distill":
                i = e.fields["mt_index"]
                distill(self.ctx.ws, mp_id=self.ctx.mp.mp_id, run_id=self.ctx.run.run_id,
                        run_rel=self.ctx.ws.rel(self.ctx.run.dir), task=state.tasks[i], chain=state.chains[i],
                        emit=self.emit)  # fmt: skip
            elif e.kind == "refresh":
                self._start(state, e.fields["mt_index"], restart=True)
            # "integrate": the loop integrates accepted tasks, one at a time (_integrate)

    # -- integration -------------------------------------------------------------------

    def _integrate(self, state: LoopState) -> bool:
        """Integrate the first accepted task (plan order); True when one was tried."""
        accepted = [i for i, t in enumerate(state.tasks) if t.status == "accepted"]
        if not accepted:
            return False
        i = accepted[0]
        task = state.tasks[i]
        last = task.records[-1]
        message = f"{self.ctx.mp.mp_id} {task.mt_id}: {state.plan.tasks[i].title}"
        evidence = f"{self.ctx.ws.rel(self.ctx.run.dir)}/{last['evidence']}"
        commit = self.trees.commit(task.mt_id, message, f"Evidence: {evidence}")
        n = state.integrations + 1
        name = f"INT-{n}"
        step = self.steps.start(name, "integrate", task.mt_id, str(n), commit)
        done = [k for k, t in enumerate(state.tasks) if t.status == "completed"]
        checks = sorted(set(state.checks_of(i)).union(*(state.checks_of(k) for k in done)))
        result = self.integrator.integrate(commit, checks, name)
        if result.outcome == "interrupted":
            self.steps.release(step)
            return True
        ev = IterationEvidence(self.ctx.run.dir, name, 1)
        rec = result.record(ev, task, i, commit, level=state.cursors[i].level, seq=state.applied + 1)
        self.steps.finish(step, rec, ok=rec["ok"], error=None if rec["ok"] else result.detail)
        if result.commit:
            self.publisher.committed(task.mt_id, result.commit)
        self._act(state, state.apply_integration(rec))
        return True

    # -- the end -----------------------------------------------------------------------

    def _stop_all(self, state: LoopState) -> None:
        """The run ended: stop what still runs and wait for it (nothing of it is recorded)."""
        self.halt.set()
        while self.flights:
            self._collect(state, block=True)

    def _publish(self, state: LoopState) -> None:
        """The snapshot `status` shows, with every running task."""
        running = [
            running_task(
                f.a.mt_id,
                f.a.level_index,
                f.a.level.name,
                f.a.iteration,
                f.a.ev.path("stdout.txt"),
                state.tasks[f.a.mt_index or 0].started_at,
                self.ctx.ws.rel(self.trees.path(f.a.mt_id)),
                self.runner.where(f.a.mt_id),
            )  # fmt: skip
            for f in sorted(self.flights.values(), key=lambda f: f.a.mt_index or 0)
        ]
        self.publisher.publish(state, live=True, running=running)
        self.next_publish = time.monotonic() + 1.0
