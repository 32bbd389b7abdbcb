"""The one scheduler of an agent run, for 1..N tasks (issues #29, #40).

It is the one thread that decides and records. Each turn it ends the run when a guard says
so (SYSTEM/STOP, the budget, the iteration cap), integrates an accepted task, runs a
planning round or a drift check when one is due and nothing is in flight, and starts what
may start: the next iteration of each live task, new tasks (when they run in worktrees of
their own), within `[agent] max_parallel`, each level's `max_parallel` and the hourly call
limit. Each attempt (prompt and ledger step made here) goes to its `Runner` (a worker
thread here, or a worker of the fleet); what comes back is recorded in the order it is
applied (`seq`: replay follows it). Where a task works is the `Placement`'s say: in the
run's worktree one at a time, or each in its own.

A stop lets what runs finish, then pauses; a cancel or a second stop stops every task's
process group; a usage limit holds that level's tasks until its reset, and the run waits
when nothing else can go on.
"""

from __future__ import annotations

import hashlib
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from mp_engine.agent.call.caller import why_fatal
from mp_engine.agent.call.chain import describe
from mp_engine.agent.call.invoke import Call, CallKind
from mp_engine.agent.evidence import IterationEvidence
from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.memory.distill import distill
from mp_engine.agent.run import guard
from mp_engine.agent.run.attempt import Attempt, AttemptOutcome, Runner, record
from mp_engine.agent.run.parts import WorkspaceParts
from mp_engine.agent.run.placement import Placement
from mp_engine.agent.run.publisher import Publisher, iso_utc, running_task, where
from mp_engine.agent.run.sidesteps import SideSteps
from mp_engine.agent.run.steps import iteration_step
from mp_engine.agent.scope import RunScope
from mp_engine.agent.state import ending
from mp_engine.agent.state.apply import apply
from mp_engine.agent.state.kinds import Effect, EffectKind, RecordKind, TaskStatus
from mp_engine.agent.state.model import RunState
from mp_engine.core.clock import now_iso
from mp_engine.execute.base import ExecResult

TURN = 0.1  # seconds the scheduler waits for an attempt before it looks at stops again
PUBLISH_GAP = 0.2  # seconds between two snapshots for `status` at least (Scheduler.next_publish)


@dataclass
class Flight:
    a: Attempt
    parts: WorkspaceParts


class Scheduler:
    def __init__(
        self,
        scope: RunScope,
        *,
        halt: guard.Halt,
        placement: Placement,
        runner: Runner,
        publisher: Publisher,
        sides: SideSteps,
    ):
        """`halt`: the stop event of every attempt's and side step's work (the parts were
        built with it): set by the run's end, and by the engine's `stop_now` (a cancel, a
        second stop)."""
        self.scope = scope
        self.cfg = scope.cfg
        self.halt = halt
        self.placement = placement
        self.runner = runner
        self.publisher = publisher
        self.sides = sides
        self.flights: dict[Future[AttemptOutcome], Flight] = {}
        self.held: dict[str, str] = {}  # level name -> resume_at of its usage limit (or the budgets')
        self.held_why = ""
        self.held_kind = "usage_limit"  # or "budget": every level waits for a budget's reset (issue #42)
        self.stopped_why: str | None = None  # why the last call or checks were cut short
        # The snapshot `status` shows is rewritten each second, and sooner (PUBLISH_GAP after
        # the last one) when tasks start or end: a fast loop does not rewrite it per iteration.
        self.next_publish = 0.0
        self.last_publish = -PUBLISH_GAP

    # -- the loop ----------------------------------------------------------------------

    def run(self, state: RunState) -> ExecResult | None:
        """Until the run ends (None: `state.final` is set) or pauses (the ExecResult). Run
        again when the run goes on (a pull request's red CI sent it back to work)."""
        self.halt.clear()  # the last run's end stopped its attempts; nothing runs now
        self._recover(state)
        pool = ThreadPoolExecutor(max_workers=self.placement.limit, thread_name_prefix="mp-task")
        ctx = self.scope.ctx
        last = time.monotonic()
        try:
            while True:
                self._collect(state, block=False)
                now = time.monotonic()
                self.scope.budget.charge(now - last)  # the wall time of the run, shared by its tasks
                last = now
                if state.final is not None:
                    self._stop_all(state)
                    return None
                if ctx.stop.is_set() or ctx.stop_now.is_set():
                    if self.flights:
                        self._collect(state, block=True)
                        continue
                    return self._stopped(state)
                stop = guard.due(self.scope, state)
                if stop is not None:  # what runs finishes and is recorded first
                    if self.flights:
                        self._collect(state, block=True)
                    else:
                        guard.end(state, stop)
                    continue
                if self._integrate(state):
                    continue
                if state.campaign.pending is not None:  # a planning round or a drift check, alone
                    if self.flights:
                        self._collect(state, block=True)
                        continue
                    waiting = self._waiting(state, self.sides.level(state))
                    if waiting is not None:
                        return waiting
                    effects, cut_short = self.sides.step(state, self._unanswered)
                    self.stopped_why = cut_short or self.stopped_why
                    self.act(state, effects)
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
                if state.isolated:
                    self.act(state, ending.settle(state))  # a final drift check may come first
                if state.final is None and state.campaign.pending is None:
                    raise RuntimeError(f"agent run stuck: {[(t.mt_id, t.status) for t in state.tasks]}")
        finally:
            self.halt.set()  # whatever still runs stops now (its results are not recorded)
            pool.shutdown(wait=True)
            self.runner.close()

    def _stopped(self, state: RunState) -> ExecResult:
        """A stop, with nothing left running: the run pauses; a level's usage limit
        outlives the stop (the run waits for its reset)."""
        held = self._waiting(state) if self.held else None
        return held or self.publisher.pause(state, "stop", self.stopped_why or guard.STOPPED)

    def _recover(self, state: RunState) -> None:
        """After a restart: an integration the crash cut short is undone (it runs again)."""
        pending = {
            f"{self.scope.mp.mp_id} {t.mt_id}: {state.plan.tasks[i].title}": t.mt_id
            for i, t in enumerate(state.tasks)
            if t.status is TaskStatus.ACCEPTED
        }
        undone = self.placement.recover(pending)
        if undone is not None:
            self.scope.emit(
                "micro_task_integration_undone", id="MPE-MT-UNDONE", mt=undone, reason="the engine restarted"
            )

    def _waiting(self, state: RunState, side: str | None | bool = False) -> ExecResult | None:
        """Nothing in flight and nothing may start: a usage limit or the hourly call limit
        holds what is left; the run waits (`resume_at`), or None. `side`: a planning round
        or a drift check comes next, calling that level (None: it calls none)."""
        if self.held and (side is False or side in self.held):
            resume_at = min(self.held.values()) if side is False else self.held[str(side)]
            why = self.held_why or "the provider's usage limit"
            return self.publisher.wait(state, self.held_kind, why, resume_at, announced=True)  # by `_unanswered`
        if side is None:
            return None
        slot = self.scope.limiter.next_slot(time.time())
        if slot is not None:
            why = f"{self.cfg.calls_per_hour} agent calls in the last hour (`[agent] calls_per_hour`)"
            return self.publisher.wait(state, "rate_limit", why, iso_utc(slot))
        return None

    # -- starting ----------------------------------------------------------------------

    def _launch(self, state: RunState, pool: ThreadPoolExecutor) -> None:
        """Next attempts of live tasks (plan order), then new tasks, within the limits."""
        flying = {f.a.mt_index for f in self.flights.values()}
        for i in state.live():
            if i not in flying and state.tasks[i].status is TaskStatus.ACTIVE and self._may_call(state, i):
                self._attempt(state, i, pool)
        # One worktree at a time: `git worktree add` reads the other worktrees' records,
        # and two at once fail ("failed to read .git/worktrees/<name>/commondir").
        for j in state.startable(set(state.live()))[: max(0, self.placement.limit - len(state.live()))]:
            self._start(state, j, restart=False)
            if self._may_call(state, j):
                self._attempt(state, j, pool)

    def _may_call(self, state: RunState, i: int) -> bool:
        task = state.tasks[i]
        if task.solo and len(state.live()) > 1:
            return False  # it waits until no other task runs
        level = state.chains[i][state.cursors[i].level]
        if level.name in self.held or len(self.flights) >= self.placement.limit:
            return False
        if level.max_parallel is not None:
            running = sum(1 for f in self.flights.values() if f.a.level.name == level.name)
            if running >= level.max_parallel:
                return False
        return self.scope.limiter.next_slot(time.time()) is None

    def _start(self, state: RunState, i: int, *, restart: bool) -> None:
        """Task `i`'s worktree from the tip of `mp/<MP-id>` (fresh, or refreshed), recorded."""
        task = state.tasks[i]
        base, digest = self.placement.start(task.mt_id, restart=restart)
        n = task.starts + 1
        step = self.scope.steps.start(f"{task.mt_id}_start-{n}", "start", task.mt_id, str(n), base)
        rec = {
            "mt": task.mt_id,
            "mt_index": i,
            "base": base,
            "digest": digest,
            "worktree": self.placement.where(task.mt_id),
            "restart": restart,
            "at": now_iso(),
            "seq": state.applied + 1,
        }
        self.scope.steps.finish(step, rec, ok=True)
        self.act(state, apply(state, RecordKind.START, rec))

    def _attempt(self, state: RunState, i: int, pool: ThreadPoolExecutor) -> None:
        """Prepare the task's next iteration here and hand its work to the runner."""
        task = state.tasks[i]
        if task.refresh_due:  # a crash came between its failed integration and the refresh
            self._start(state, i, restart=True)
        parts = self.placement.parts(task.mt_id, task.base)
        state.focus = i
        plan_task, level, iteration = state.plan.tasks[i], state.levels[state.level], state.next_iteration
        ev = IterationEvidence(self.scope.run_dir, task.mt_id, iteration)
        step_id = iteration_step(task.mt_id, iteration)
        text = self.scope.steps.prompt_once(ev, step_id, lambda: parts.prompter.worker(state, i, iteration, level))
        sha = hashlib.sha256(text.encode()).hexdigest()
        step = self.scope.steps.start(step_id, "agent", plan_task.mt_id, str(iteration), str(state.level), sha)
        self.scope.emit("micro_task_iteration_started", id="FR-EVT-MT-002", **where(state), agent=level.name)
        a = Attempt(task.mt_id, i, iteration, level, state.level, step, ev, state.checks_of(i))
        self.flights[pool.submit(self.runner, parts, a)] = Flight(a, parts)
        self._changed()

    # -- what comes back ---------------------------------------------------------------

    def _collect(self, state: RunState, *, block: bool) -> None:
        """Record and apply the attempts that finished, in plan order."""
        if not self.flights:
            return
        done, _ = wait(list(self.flights), timeout=TURN if block else 0, return_when=FIRST_COMPLETED)
        for fut in sorted(done, key=lambda f: self.flights[f].a.mt_index or 0):
            flight = self.flights.pop(fut)
            self._settle(state, flight, fut.result())
            self._changed()

    def _settle(self, state: RunState, flight: Flight, out: AttemptOutcome) -> None:
        a = flight.a
        if state.final is not None:
            self.scope.steps.release(a.step)  # never recorded: the run ended
            return
        state.focus = a.mt_index or 0
        if out.checks_interrupted:
            self.scope.steps.release(a.step)
            self.stopped_why = "a second stop signal interrupted the checks; the iteration is retried"
            return
        if not out.answered:
            who = describe(state.levels, a.level_index)
            killed = "a second stop signal killed the agent call; the iteration is retried"
            self._unanswered(state, flight.parts, a, out.call, who, "[agent] levels", killed)
            return
        self.act(state, apply(state, RecordKind.ITERATION, record(flight.parts, a, out, state.applied + 1)))

    def _unanswered(
        self, state: RunState, parts: WorkspaceParts, a: Attempt, call: Call, who: str, section: str, killed: str
    ) -> None:
        """A call that did not answer: it runs again after a stop (`killed` says why when a
        second stop signal killed it) or its level's usage limit (held until the reset);
        a CLI that cannot work ends the run BLOCKED, with its fix (`who` and `section`
        name the level)."""
        if call.kind is CallKind.INTERRUPTED:
            self.scope.steps.release(a.step)
            self.stopped_why = killed
        elif call.kind is CallKind.USAGE_LIMIT:
            self.scope.steps.release(a.step)
            assert call.resume_at is not None
            self.held[a.level.name] = max(self.held.get(a.level.name, call.resume_at), call.resume_at)
            self.held_why = call.detail or "the provider's usage limit"
            self.scope.emit(
                "micro_task_pause_requested",
                id="FR-EVT-MT-007",
                **where(state),
                kind="usage_limit",
                reason=self.held_why,
                resume_at=call.resume_at,
                level_name=a.level.name,
            )
        elif call.kind is CallKind.BUDGET:
            self.scope.steps.release(a.step)
            self._over_budget(state, call)
        elif call.ends_run:
            why = why_fatal(call, a.level, who, section, self.scope.mp.mp_id, self.cfg.transient_retries)
            task = a.mt_index is not None  # else a planning round's or drift check's call: placed at the task in focus
            mt_id = a.mt_id if task else (state.task.mt_id if state.task else None)
            iteration = a.iteration if task else state.next_iteration
            rec = parts.recorder.fatal(a, call, why, mt_id=mt_id, iteration=iteration, seq=state.applied + 1)
            self.act(state, apply(state, RecordKind.FATAL, rec))

    def _over_budget(self, state: RunState, call: Call) -> None:
        """An engine budget is spent (issue #42): the run ends BACKPRESSURE (`on_budget =
        "end"`), or every level waits for the reset, like a usage limit of them all."""
        if self.cfg.on_budget == "end":
            ending.end(state, cert.BACKPRESSURE, "budget", f"The engine's agent budget is spent: {call.detail}.")
            return
        assert call.resume_at is not None
        self.held.update({lv.name: call.resume_at for lv in self.cfg.all_levels() if not lv.hard_gate})
        self.held_why, self.held_kind = call.detail, "budget"
        self.scope.emit(
            "micro_task_pause_requested",
            id="FR-EVT-MT-007",
            **where(state),
            kind="budget",
            reason=call.detail,
            resume_at=call.resume_at,
        )

    def act(self, state: RunState, effects: list[Effect]) -> None:
        """Carry out what a decision asks (the state never acts itself)."""
        for e in effects:
            if e.kind is EffectKind.EVENT:
                self.scope.emit(e.name, id=e.event_id, **e.fields)
            elif e.kind is EffectKind.COMMIT:
                self._committed(state, e.fields["mt_index"])
            elif e.kind is EffectKind.DISTILL:
                i = e.fields["mt_index"]
                distill(self.scope, task=state.tasks[i], chain=state.chains[i], announce=True)
            elif e.kind is EffectKind.REFRESH:
                self._start(state, e.fields["mt_index"], restart=True)
            # INTEGRATE: the loop integrates accepted tasks, one at a time (_integrate)

    def _committed(self, state: RunState, i: int) -> None:
        """Task `i`, done in the run's worktree: its one commit on the work branch."""
        mt_id = state.tasks[i].mt_id
        records = state.tasks[i].records
        evidence = f"{self.scope.run_rel}/{records[-1]['evidence']}" if records else self.scope.run_rel
        sha = self.placement.commit(mt_id, state.plan.tasks[i].title, evidence)
        self.publisher.committed(mt_id, sha)
        self.scope.emit(
            "micro_task_committed", id="MPE-MT-COMMIT", mt=mt_id, branch=self.publisher.work.branch, commit=sha
        )

    # -- integration -------------------------------------------------------------------

    def _integrate(self, state: RunState) -> bool:
        """Integrate the first accepted task (plan order); True when one was tried."""
        accepted = state.accepted()
        if not accepted:
            return False
        i = accepted[0]
        task = state.tasks[i]
        message = f"{self.scope.mp.mp_id} {task.mt_id}: {state.plan.tasks[i].title}"
        evidence = f"{self.scope.run_rel}/{task.records[-1]['evidence']}"
        commit = self.placement.task_commit(task.mt_id, message, evidence)
        n = state.integrations + 1
        name = f"INT-{n}"
        step = self.scope.steps.start(name, "integrate", task.mt_id, str(n), commit)
        done = [k for k, t in enumerate(state.tasks) if t.status is TaskStatus.COMPLETED]
        checks = sorted(set(state.checks_of(i)).union(*(state.checks_of(k) for k in done)))
        result = self.placement.integrate(commit, checks, name)
        if result.outcome == "interrupted":  # a stop or a cancel: it runs again (or never)
            self.scope.steps.release(step)
            return True
        ev = IterationEvidence(self.scope.run_dir, name, 1)
        rec = result.record(ev, task, i, commit, level=state.cursors[i].level, seq=state.applied + 1)
        self.scope.steps.finish(step, rec, ok=rec["ok"], error=None if rec["ok"] else result.detail)
        if result.commit:
            self.publisher.committed(task.mt_id, result.commit)
        self.act(state, apply(state, RecordKind.INTEGRATE, rec))
        return True

    # -- the end -----------------------------------------------------------------------

    def _stop_all(self, state: RunState) -> None:
        """The run ended: stop what still runs and wait for it (nothing of it is recorded)."""
        self.halt.set()
        while self.flights:
            self._collect(state, block=True)

    def _publish(self, state: RunState) -> None:
        """The snapshot `status` shows, with every running task."""
        running = [
            running_task(
                f.a.mt_id,
                f.a.level_index,
                f.a.level.name,
                f.a.iteration,
                f.a.ev.path("stdout.txt"),
                state.tasks[f.a.mt_index or 0].started_at,
                self.placement.where(f.a.mt_id),
                self.runner.where(f.a.mt_id),
            )
            for f in sorted(self.flights.values(), key=lambda f: f.a.mt_index or 0)
        ]
        self.publisher.publish(state, live=True, running=running)
        self.last_publish = time.monotonic()
        self.next_publish = self.last_publish + 1.0

    def _changed(self) -> None:
        """A task started or ended: the snapshot is due soon."""
        self.next_publish = min(self.next_publish, self.last_publish + PUBLISH_GAP)
