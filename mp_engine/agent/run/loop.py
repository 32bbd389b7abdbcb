"""The agent loop: drive a coding-agent CLI through a bounded, verified loop. `AgentRun`
sequences collaborators, each built with explicit arguments and owning one concern; none
calls another:

    Caller      calling an agent (caller.py)
    Checker     the engine's own verdict: the MP's checks (checks.py)
    Recorder    recording a step: the iteration record, evidence, learnings (recorder.py)
    Prompter    a fresh prompt from artifacts (prompter.py)
    Publisher   the progress snapshot, pauses, the end (publisher.py)
    AgentSteps  the run's ledger steps (ledgersteps.py)

and `LoopState.apply` (loopstate.py) decides, a pure function of the records, replayed
from the ledger after a crash (resume.py). Tasks at once: parallel.py.

One iteration (docs/AGENT.md): guard (stop, budget, limits), prepare a fresh prompt, call
the level's CLI, parse its untrusted claims, run the checks, record the evidence, then let
`LoopState` decide (micro-task done, escalate, breaker, ...). Each iteration is one ledger
step `MT-001_iter-002` whose idempotency key hashes the MT id, iteration, level and prompt;
its artifact is the iteration record, so an iteration that finished is never run again.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from mp_engine.agent.call.caller import why_fatal
from mp_engine.agent.call.chain import describe
from mp_engine.agent.call.invoke import Call
from mp_engine.agent.call.limiter import CallLimiter
from mp_engine.agent.evidence import IterationEvidence, Snapshot, Worktree
from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.memory.distill import distill, distilled
from mp_engine.agent.plan.decompose import Plan, decompose, goal_of
from mp_engine.agent.run import answers
from mp_engine.agent.run import rounds as campaign
from mp_engine.agent.run.attempt import Attempt, call, record, work
from mp_engine.agent.run.parts import workspace_parts
from mp_engine.agent.run.progress import BASELINE_FILE, Progress
from mp_engine.agent.run.publisher import Publisher, iso_utc, missing, need_info, where
from mp_engine.agent.run.resume import replay, report_resume
from mp_engine.agent.run.scheduler import Dispatch, Scheduler, parallel_limit
from mp_engine.agent.run.steps import AgentSteps, iteration_step
from mp_engine.agent.run.workbranch import NoGit, WorkBranch
from mp_engine.agent.state.loopstate import Effect, LoopState
from mp_engine.config import AgentLevel
from mp_engine.core.atomic import atomic_write_json
from mp_engine.execute.base import ExecResult
from mp_engine.execute.steps import StepContext, wall_used


class AgentRun:
    """One MP's loop; rebuilt from the run archive on every (re-)entry."""

    def __init__(self, ctx: StepContext, dispatch: Dispatch | None = None):
        self.ctx = ctx
        self.dispatch = dispatch
        self.cfg = ctx.config.agent
        self.mp = ctx.mp
        # `Plan: auto` (or `[agent] plan`): a planner level plans the tasks (campaign.py).
        self.planned = (ctx.mp.headers.get("Plan") or self.cfg.plan) == "auto"
        self.first_plan: Plan = goal_of(ctx.mp) if self.planned else decompose(ctx.mp)
        self.run_dir = ctx.run.dir
        self.run_rel = ctx.ws.rel(ctx.run.dir)
        # Tasks at once (parallel.py): `[agent] max_parallel`, lowered by `Max-Parallel:`;
        # kept in the run's progress so a restart goes on as the run began.
        started = Progress.load(self.run_dir)
        self.limit = (started.data.get("parallel") if started else None) or parallel_limit(self.cfg, ctx.mp)
        # The agent, its checks and the evidence work in the MP's own worktree on branch
        # mp/<MP-id> (workbranch.py), set up when the loop starts; parallel tasks each in a
        # worktree of their own (taskbranch.py) beside it, as do tasks whose attempts run on
        # a fleet of workers (`dispatch`: mp_engine/fleet), even one at a time.
        self.parallel = self.limit > 1 or dispatch is not None
        self.work = WorkBranch(ctx.ws, ctx.mp.mp_id, ctx.run.run_id, parallel=self.parallel)
        self.limiter = CallLimiter(ctx.ws.local_dir / "agent_calls.log", self.cfg.calls_per_hour)
        self.learnings_path = self.run_dir / "agent" / "learnings.md"
        self.steps = AgentSteps(ctx.ledger, ctx.run.steps_dir)

    def emit(self, name: str, event_id: str, **fields: Any) -> None:
        self.ctx.events.emit(name, id=event_id, mp=self.mp.mp_id, run=self.ctx.run.run_id, **fields)

    # -- the loop ----------------------------------------------------------------------

    def run(self) -> ExecResult:
        refused = self._preconditions()
        if refused is not None:
            return refused
        worktree = Worktree(self.work.path)
        progress = Progress.load(self.run_dir)
        fresh = progress is None
        if progress is None:
            base = worktree.snapshot()
            (self.run_dir / "agent").mkdir(exist_ok=True)
            atomic_write_json(self.run_dir / BASELINE_FILE, {"head": base.head, "files": base.files}, durable=False)
            progress = Progress.create(
                self.run_dir,
                mp_id=self.mp.mp_id,
                run_id=self.ctx.run.run_id,
                policy=self.cfg.model_dump(mode="json"),
                tasks=self.first_plan.summary(self.mp),
                base={"head": base.head, "digest": base.digest},
                parallel=self.limit,
            )
        else:
            raw = json.loads((self.run_dir / BASELINE_FILE).read_text(encoding="utf-8"))
            base = Snapshot(raw["head"], raw["files"])
        self._build(progress, worktree, base)
        parallel = self.parallel
        state = LoopState(self.cfg, self.first_plan, progress.data["base"]["digest"], self.planned, parallel)
        replay(state, self.ctx.ledger, self.ctx.run.steps_dir)
        self.act(state, answers.take(state, self.steps, self.run_dir))  # a person answered the task it ended on
        if any(t.answers for t in state.tasks):
            self.work.uncommit_leftovers()
        if parallel:  # tasks that ran at once spent the wall time of their union, not its sum
            self.ctx.budget.used = wall_used(self.ctx.ledger.model.steps)
        if fresh:
            routes = {r.domain: [lv.name for lv in r.levels] for r in self.cfg.routes}
            self.emit(
                "micro_task_loop_started",
                "FR-EVT-MT-001",
                **where(state),
                micro_tasks=[t.mt_id for t in state.plan.tasks],
                planned=self.planned,
                levels=[lv.name for lv in self.cfg.levels],
                **({"routes": routes} if routes else {}),
                **({"parallel": self.limit} if parallel else {}),
            )
        else:
            report_resume(state, progress, self.ctx.ledger, self.emit)
            for i, task in enumerate(state.tasks):  # a crash may have come between success and candidate
                if task.status == "completed" and (task.final_level or 0) > 0:
                    self._distill(state, i, announce=False)
            progress.save()
        # Per-iteration writes skip fsync; `AgentSteps.checkpoint` makes each finished step
        # durable at once (a power loss costs at most the running iteration).
        self.ctx.ledger.durable, self.ctx.ledger.deferred = False, True
        try:
            if parallel:
                paused = self._scheduler(progress).run(state)
                if paused is not None:
                    return paused
            while state.final is None:
                paused = self.iterate(state)
                if paused is not None:
                    return paused
            return self.publisher.finish(state, self.ctx, distilled(self.ctx.ws, self.ctx.run.run_id, state.tasks))
        finally:
            self.ctx.ledger.durable, self.ctx.ledger.deferred = True, False
            self.ctx.events.sync()
            self.ctx.ledger.save(durable=True)

    def _preconditions(self) -> ExecResult | None:
        """NEED_INFO before anything runs; otherwise the worktree, made (or found) now."""
        lacking = missing(self.cfg, self.mp, self.first_plan, self.planned)
        if lacking is not None:
            return self._need_info(*lacking)
        try:
            self.work.ensure(resumed=Progress.load(self.run_dir) is not None)
        except NoGit as e:
            return self._need_info(
                "no_git",
                f"An agent MP works on a branch of its own (mp/<MP-id>), so the workspace must be a git "
                f"repository with at least one commit, and {e}.",
            )
        return None

    def _need_info(self, reason: str, detail: str) -> ExecResult:
        at = {"mp": self.mp, "plan": self.first_plan, "run_dir": self.run_dir, "run_rel": self.run_rel}
        return need_info(reason, detail, **at, emit=self.emit)

    def _build(self, progress: Progress, worktree: Worktree, base: Snapshot) -> None:
        """The collaborators of a run whose worktree exists: all in that worktree."""
        self.progress = progress
        self.publisher = Publisher(
            self.cfg,
            mp=self.mp,
            run_dir=self.run_dir,
            run_rel=self.run_rel,
            progress=progress,
            budget=self.ctx.budget,
            limiter=self.limiter,
            work=self.work,
            cancelled=self.ctx.cancelled,
            emit=self.emit,
        )
        self.parts = workspace_parts(
            self.ctx,
            workdir=self.work.path,
            map_cache=self.work.map_cache,
            worktree=worktree,
            base=base,
            nonce=progress.nonce,
            limiter=self.limiter,
            steps=self.steps,
            learnings_path=self.learnings_path,
            emit=self.emit,
        )

    def _scheduler(self, progress: Progress) -> Scheduler:
        """Parallel tasks' scheduler; planning rounds and drift checks alone, in this run's parts."""
        return Scheduler(
            self.ctx,
            limit=self.limit,
            work=self.work,
            steps=self.steps,
            publisher=self.publisher,
            nonce=progress.nonce,
            limiter=self.limiter,
            learnings_path=self.learnings_path,
            emit=self.emit,
            side_step=lambda state: self.plan_step(state) if state.pending == "plan" else self.drift_step(state),
            dispatch=self.dispatch,
        )

    # -- one iteration -----------------------------------------------------------------

    def iterate(self, state: LoopState) -> ExecResult | None:
        """Run one iteration; return an ExecResult only to pause (stop, wait)."""
        paused = self.guard(state)
        if paused is not None or state.final is not None:
            return paused
        if state.pending == "plan":  # a planning round or a drift check comes first
            return self.plan_step(state)
        if state.pending == "drift":
            return self.drift_step(state)
        task = state.plan.tasks[state.mt_index]
        level: AgentLevel = state.levels[state.level]
        iteration = state.next_iteration
        step_id = iteration_step(task.mt_id, iteration)
        ev = IterationEvidence(self.run_dir, task.mt_id, iteration)
        text = self.steps.prompt_once(
            ev, step_id, lambda: self.parts.prompter.worker(state, task.index, iteration, level)
        )
        sha = hashlib.sha256(text.encode()).hexdigest()
        step = self.steps.start(step_id, "agent", task.mt_id, str(iteration), str(state.level), sha)
        self.publisher.publish(state, live=True)
        self.emit("micro_task_iteration_started", "FR-EVT-MT-002", **where(state), agent=level.name)
        a = Attempt(task.mt_id, task.index, iteration, level, state.level, step, ev, state.checks_of(task.index))
        out = work(self.parts, self.steps, a, self.progress.nonce)
        if out.checks_interrupted:
            self.steps.release(step)
            return self.publisher.pause(
                state, "stop", "a second stop signal interrupted the checks; the iteration is retried"
            )
        if not out.answered:
            who = describe(state.levels, state.level)
            killed = "a second stop signal killed the agent call; the iteration is retried"
            return self._unanswered(state, a, out.call, who, "[agent] levels", killed)
        self.act(state, state.apply(record(self.parts, a, out, state.applied + 1)))
        # No publish here: the next iteration publishes as it starts, and the end of the
        # loop or a pause publishes too.
        return None

    def guard(self, state: LoopState) -> ExecResult | None:
        """Before an iteration: a stop pauses; SYSTEM/STOP, the budget and the iteration cap
        end the loop (`state.final`); the hourly call limit waits."""
        ctx, cfg, budget = self.ctx, self.cfg, self.ctx.budget
        task = state.task if state.pending is None else None  # None: a planning round or a drift check
        what = task.mt_id if task else "the plan"
        when = f"{what} iteration {state.next_iteration}" if task else what
        if ctx.stop.is_set() or ctx.stop_now.is_set():
            return self.publisher.pause(
                state, "stop", "a stop signal (SIGTERM/SIGINT); the loop resumes when the engine restarts"
            )
        if ctx.ws.stop_file.exists():
            state.end(
                cert.BACKPRESSURE,
                "stop_file",
                f"{ctx.ws.rel(ctx.ws.stop_file)} was found before {when}; the loop stopped as asked.",
            )
        elif budget.remaining() <= 0:
            state.end(
                cert.TIMEOUT,
                "wall_budget",
                f"The {budget.total:g} s budget ({budget.describe}) was spent before {what} passed.",
            )
        elif state.total >= cfg.max_iterations:
            state.end(
                cert.TIMEOUT,
                "max_iterations",
                f"All {cfg.max_iterations} iterations (`[agent] max_iterations`) were spent before {what} passed.",
            )
        elif task is not None and state.pause_due(state.mt_index):  # `(pause)`: a person looks first
            state.pause_before(state.mt_index)
        elif (slot := self.limiter.next_slot(time.time())) is not None:
            why = f"{cfg.calls_per_hour} agent calls in the last hour (`[agent] calls_per_hour`)"
            return self.publisher.wait(state, "rate_limit", why, iso_utc(slot))
        return None

    def _unanswered(
        self, state: LoopState, a: Attempt, call: Call, who: str, section: str, killed: str
    ) -> ExecResult | None:
        """A call that did not answer: a pause (the step runs again; `killed` says why when
        a second stop signal killed it), or the end (the CLI cannot work: BLOCKED, with
        its fix; `who` and `section` name the level)."""
        if call.kind == "interrupted":
            self.steps.release(a.step)
            return self.publisher.pause(state, "stop", killed)
        if call.kind == "usage_limit":
            self.steps.release(a.step)
            assert call.resume_at is not None
            return self.publisher.wait(
                state, "usage_limit", call.detail or "the provider's usage limit", call.resume_at
            )
        if call.ends_run:
            why = why_fatal(call, a.level, who, section, self.mp.mp_id, self.cfg.transient_retries)
            mt_id = state.task.mt_id if state.task else None
            rec = self.parts.recorder.fatal(
                a.step,
                a.ev,
                call,
                why,
                mt_id=mt_id,
                mt_index=a.mt_index,
                iteration=state.next_iteration,
                level_index=state.level,
                seq=state.applied + 1,
            )
            state.apply_fatal(rec)
        return None

    def act(self, state: LoopState, effects: list[Effect]) -> None:
        for e in effects:
            if e.kind == "event":
                self.emit(e.name, e.event_id, **e.fields)
                if e.name == "micro_task_complete":
                    self._commit_task(state, e.fields["mt"])
            elif e.kind == "distill":
                self._distill(state, e.fields["mt_index"], announce=True)

    def _commit_task(self, state: LoopState, mt_id: str) -> None:
        """One commit per accepted micro-task on the work branch, pointing at its evidence."""
        task = next(t for t in state.plan.tasks if t.mt_id == mt_id)
        records = state.tasks[task.index].records
        evidence = f"{self.run_rel}/{records[-1]['evidence']}" if records else self.run_rel
        sha = self.work.commit(f"{self.mp.mp_id} {mt_id}: {task.title}", f"Evidence: {evidence}")
        self.publisher.committed(mt_id, sha)
        self.emit("micro_task_committed", "MPE-MT-COMMIT", mt=mt_id, branch=self.work.branch, commit=sha)

    def _distill(self, state: LoopState, mt_index: int, *, announce: bool) -> None:
        distill(
            self.ctx.ws,
            mp_id=self.mp.mp_id,
            run_id=self.ctx.run.run_id,
            run_rel=self.run_rel,
            task=state.tasks[mt_index],
            chain=state.chains[mt_index],  # the task's own chain (its route, or [agent] levels)
            emit=self.emit if announce else None,
        )

    # -- between iterations: a planning round, a drift check -------------------------

    def plan_step(self, state: LoopState) -> ExecResult | None:
        level = self.cfg.planner
        assert level is not None
        name, attempt_no = campaign.plan_round(state)
        ev = IterationEvidence(self.run_dir, name, attempt_no)
        step_id = iteration_step(name, attempt_no)
        text = self.steps.prompt_once(ev, step_id, lambda: self.parts.prompter.planner(state))
        step = self.steps.start(step_id, "plan", name, str(attempt_no), hashlib.sha256(text.encode()).hexdigest())
        self.publisher.publish(state, live=True)
        self.emit("campaign_planning", "MPE-PLAN-START", round=state.plan_round, attempt=attempt_no, agent=level.name)
        a = Attempt(name, None, attempt_no, level, state.level, step, ev, [])
        answer = call(self.parts, self.steps, a)
        if answer.pauses or answer.ends_run:
            killed = "a second stop signal killed the planner's call; it runs again"
            return self._unanswered(state, a, answer, f"the planner ({level.name})", "[agent.planner]", killed)
        said = self.parts.caller.read_output(ev)
        rec = campaign.plan_record(state, said, self.progress.nonce, self.mp, answer, attempt_no, ev.rel)
        rec.update(seq=state.applied + 1, usage=answer.usage, level_name=level.name)
        self.parts.recorder.side(step, ev, rec, answer, ok="invalid" not in rec)
        self.act(state, state.apply_plan(rec))
        return None

    def drift_step(self, state: LoopState) -> ExecResult | None:
        name, at = campaign.drift_check(state)
        step = self.steps.start(name, "drift", name, str(at))
        self.emit("campaign_drift_check_started", "MPE-DRIFT-START", at=at)
        ran = self.parts.checker.run(campaign.drift_checks(state, self.mp, at), name)
        if ran is None:
            self.steps.release(step)
            return self.publisher.pause(state, "stop", "a stop signal interrupted the drift check; it runs again")
        rec = campaign.drift_record(at, [c.check_id for c, _, _ in ran], [c.check_id for c, ok, _ in ran if not ok])
        ev = IterationEvidence(self.run_dir, name, 1)
        level = self.cfg.reflector
        if level is not None and at < 100:
            ev.write("prompt.md", self.parts.prompter.reflection(state, at, rec["regressed"]))
            a = Attempt(name, None, 1, level, state.level, step, ev, [])
            answer = call(self.parts, self.steps, a)
            if answer.pauses or answer.ends_run:
                killed = "a second stop signal killed the reflector's call; it runs again"
                return self._unanswered(state, a, answer, f"the reflector ({level.name})", "[agent.reflector]", killed)
            rec = campaign.reflected(rec, self.parts.caller.read_output(ev), self.progress.nonce, ev.rel)
            rec.update(usage=answer.usage, level_name=level.name)
        rec["seq"] = state.applied + 1
        self.parts.recorder.side(step, ev, rec, None, ok=not rec["drift"])  # the reflector's time is not charged
        self.act(state, state.apply_drift(rec))
        return None
