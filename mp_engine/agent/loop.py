"""The agent loop: drive a coding-agent CLI through a bounded, verified loop.

One iteration (docs/AGENT.md): guard (stop, budget, limits), prepare a fresh prompt from
artifacts, call the level's CLI (calling.py), parse its untrusted claims, run the MP's
checks ourselves, record the evidence (recording.py), then let `LoopState` decide
(micro-task done, escalate, breaker, ...). Pauses and the end are in ending.py.
Each iteration is one ledger step `MT-001_iter-002` whose idempotency key hashes the MT
id, iteration, level and prompt; its artifact is the iteration record, so an iteration
that finished is never run again, and the state after a restart is the replay of them.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from mp_engine.agent import certificate as cert
from mp_engine.agent import learnings, prompt, workcontext
from mp_engine.agent.breakers import CallLimiter
from mp_engine.agent.calling import CallMixin
from mp_engine.agent.campaign import CampaignMixin
from mp_engine.agent.chain import chain_for, runnable
from mp_engine.agent.claims import parse_claims
from mp_engine.agent.decompose import MicroTask, Plan, decompose, goal_of
from mp_engine.agent.ending import EndMixin, iso_utc
from mp_engine.agent.evidence import IterationEvidence, Snapshot, Worktree
from mp_engine.agent.loopstate import Effect, LoopState
from mp_engine.agent.progress import BASELINE_FILE, Progress
from mp_engine.agent.recording import CheckRun, IterationCheck, RecordMixin, iter_check
from mp_engine.agent.repomap import RepoMap
from mp_engine.agent.resume import ResumeMixin
from mp_engine.agent.workbranch import NoGit, WorkBranch
from mp_engine.atomic import atomic_write_json, read_tail
from mp_engine.config import AgentLevel
from mp_engine.execute.base import ExecResult
from mp_engine.execute.steps import Budget, StepContext, run_block
from mp_engine.record.ledger import LedgerStep, StepStatus
from mp_engine.workspace import Workspace


class AgentRun(CallMixin, RecordMixin, EndMixin, CampaignMixin, ResumeMixin):
    """One MP's loop; rebuilt from the run archive on every (re-)entry."""

    def __init__(self, ctx: StepContext):
        self.cfg = ctx.config.agent
        self.mp = ctx.mp
        # `Plan: auto` (or `[agent] plan`): a planner level plans the tasks (campaign.py).
        self.planned = (ctx.mp.headers.get("Plan") or self.cfg.plan) == "auto"
        self.first_plan: Plan = goal_of(ctx.mp) if self.planned else decompose(ctx.mp)
        self.state: LoopState | None = None
        if "Timeout" in ctx.mp.headers:
            total, source = float(ctx.mp.headers["Timeout"]), "the MP's `Timeout:`"
        else:
            total, source = self.cfg.wall_budget, "`[agent] wall_budget`"
        self.budget = Budget(total, source, ctx.budget.used)
        self.ctx = replace(ctx, budget=self.budget)
        # Checks of an iteration whose agent call finished run to the end on a first stop
        # signal (the iteration is "the current step"); a second signal still kills them.
        self.checks_ctx = replace(self.ctx, stop=threading.Event())
        self.ws = ctx.ws
        # The agent, its checks and the evidence work in the MP's own worktree on branch
        # mp/<MP-id> (workbranch.py), set up when the loop starts.
        self.work = WorkBranch(ctx.ws, ctx.mp.mp_id, ctx.run.run_id)
        self.work_root: Path = ctx.ws.root
        self.run_dir = ctx.run.dir
        self.run_rel = ctx.ws.rel(ctx.run.dir)
        self.worktree: Worktree  # on the work branch, set when the loop starts (run)
        self.limiter = CallLimiter(ctx.ws.local_dir / "agent_calls.log", self.cfg.calls_per_hour)
        self.learnings_path = self.run_dir / "agent" / "learnings.md"
        self.repomap: RepoMap | None = None  # built at the first prompt, refreshed at each
        self.last_checks: list[tuple[IterationCheck, LedgerStep | None]] = []
        self.fatal_fix: str | None = None  # the proposed fix when the agent CLI cannot work

    @property
    def plan(self) -> Plan:
        """The plan as it stands: a planner's tasks join it (LoopState owns it)."""
        return self.state.plan if self.state is not None else self.first_plan

    # -- events ------------------------------------------------------------------------

    def emit(self, name: str, event_id: str, **fields: Any) -> None:
        self.ctx.events.emit(name, id=event_id, mp=self.mp.mp_id, run=self.ctx.run.run_id, **fields)

    def where(self, state: LoopState) -> dict[str, Any]:
        task = state.task
        return {"mt": task.mt_id if task else None, "iteration": state.next_iteration, "level": state.level}

    # -- the loop ----------------------------------------------------------------------

    def run(self) -> ExecResult:
        if self.planned and self.cfg.planner is None:
            return self.need_info(
                "no_planner",
                "The MP asks for a plan (`Plan: auto`), but mp-engine.toml has no `[agent.planner]` level.",
            )
        unrouted = [t.mt_id for t in self.plan.tasks if not runnable(chain_for(self.cfg, t.domain))]
        if unrouted or (not self.plan.tasks and not runnable(self.cfg.levels)):
            return self.need_info(
                "no_levels",
                "No agent is configured"
                + (f" for {', '.join(unrouted)}" if unrouted and self.cfg.routes else "")
                + ": `[agent] levels` in mp-engine.toml is empty.",
            )
        if not self.mp.checks and self.cfg.require_checks:
            return self.need_info(
                "no_checks",
                "The MP has no Validate checks, and `[agent] require_checks` is on: without checks "
                "nothing could prove the agent's work, and its word alone never suffices.",
            )
        try:
            self.work_root = self.work.ensure()
        except NoGit as e:
            return self.need_info(
                "no_git",
                f"An agent MP works on a branch of its own (mp/<MP-id>), so the workspace must be a git "
                f"repository with at least one commit, and {e}.",
            )
        self.worktree = Worktree(self.work_root)
        self.checks_ctx = replace(self.checks_ctx, ws=Workspace(self.work_root))
        progress = Progress.load(self.run_dir)
        fresh = progress is None
        if progress is None:
            base = self.worktree.snapshot()
            (self.run_dir / "agent").mkdir(exist_ok=True)
            atomic_write_json(self.run_dir / BASELINE_FILE, {"head": base.head, "files": base.files}, durable=False)
            progress = Progress.create(
                self.run_dir,
                mp_id=self.mp.mp_id,
                run_id=self.ctx.run.run_id,
                policy=self.cfg.model_dump(mode="json"),
                tasks=self.plan.summary(self.mp),
                base={"head": base.head, "digest": base.digest},
            )
        else:
            raw = json.loads((self.run_dir / BASELINE_FILE).read_text(encoding="utf-8"))
            base = Snapshot(raw["head"], raw["files"])
        self.progress = progress
        self.base = base
        state = LoopState(self.cfg, self.plan, progress.data["base"]["digest"], self.planned)
        self.state = state
        self.replay(state)
        if fresh:
            self.emit(
                "micro_task_loop_started",
                "FR-EVT-MT-001",
                **self.where(state),
                micro_tasks=[t.mt_id for t in self.plan.tasks],
                planned=self.planned,
                levels=[lv.name for lv in self.cfg.levels],
                **(
                    {"routes": {r.domain: [lv.name for lv in r.levels] for r in self.cfg.routes}}
                    if self.cfg.routes
                    else {}
                ),
            )
        else:
            self.report_resume(state)
        # Per-iteration writes skip fsync; `checkpoint()` makes each finished iteration
        # durable at once (a power loss costs at most the running iteration).
        self.ctx.ledger.durable, self.ctx.ledger.deferred = False, True
        try:
            while state.final is None:
                paused = self.iterate(state)
                if paused is not None:
                    return paused
            return self.finish(state)
        finally:
            self.ctx.ledger.durable, self.ctx.ledger.deferred = True, False
            self.ctx.events.sync()
            self.ctx.ledger.save(durable=True)

    def commit_task(self, state: LoopState, mt_id: str) -> None:
        """One commit per accepted micro-task on the work branch, pointing at its evidence."""
        task = next(t for t in self.plan.tasks if t.mt_id == mt_id)
        records = state.tasks[task.index].records
        evidence = f"{self.run_rel}/{records[-1]['evidence']}" if records else self.run_rel
        sha = self.work.commit(f"{self.mp.mp_id} {mt_id}: {task.title}", f"Evidence: {evidence}")
        self.progress.data.setdefault("commits", {})[mt_id] = sha  # `status` shows it
        self.emit("micro_task_committed", "MPE-MT-COMMIT", mt=mt_id, branch=self.work.branch, commit=sha)

    def step_id(self, state: LoopState) -> str:
        assert state.task is not None
        return f"{state.task.mt_id}_iter-{state.next_iteration:03d}"

    # -- one iteration -----------------------------------------------------------------

    def iterate(self, state: LoopState) -> ExecResult | None:
        """Run one iteration; return an ExecResult only to pause (stop, wait)."""
        paused = self.guard(state)
        if paused is not None or state.final is not None:
            return paused
        if state.pending is not None:  # a planning round or a drift check comes first
            return self.campaign_step(state)
        task = self.plan.tasks[state.mt_index]
        level: AgentLevel = state.levels[state.level]
        iteration = state.next_iteration
        step, ev = self.prepare(state, task, level)
        call = self.call(state, level, step, ev, task.mt_id, iteration)
        if call.kind == "interrupted":
            self.release(step)
            return self.pause(state, "stop", "a second stop signal killed the agent call; the iteration is retried")
        if call.kind == "usage_limit":
            self.release(step)
            assert call.resume_at is not None
            return self.wait(state, "usage_limit", call.detail or "the provider's usage limit", call.resume_at)
        if call.kind in ("auth", "billing", "not_found", "transient", "config"):
            self.fatal(state, step, ev, call, level)
            return None
        claims = parse_claims(self.read_output(ev), self.progress.nonce)
        checks = self.run_checks(task.index, step.step_id, state.dead)
        if checks is None:
            self.release(step)
            return self.pause(state, "stop", "a second stop signal interrupted the checks; the iteration is retried")
        record = self.record(state, level, step, ev, call, claims, checks)
        self.act(state, state.apply(record))
        # No publish here: the next iteration publishes as it starts, and the end of the
        # loop or a pause publishes too.
        return None

    def guard(self, state: LoopState) -> ExecResult | None:
        """Before an iteration: a stop pauses; SYSTEM/STOP, the budget and the iteration cap
        end the loop (`state.final`); the hourly call limit waits."""
        ctx, cfg = self.ctx, self.cfg
        task = state.task if state.pending is None else None  # None: a planning round or a drift check
        what = task.mt_id if task else "the plan"
        when = f"{what} iteration {state.next_iteration}" if task else what
        if ctx.stop.is_set() or ctx.stop_now.is_set():
            return self.pause(
                state, "stop", "a stop signal (SIGTERM/SIGINT); the loop resumes when the engine restarts"
            )
        if self.ws.stop_file.exists():
            state.end(
                cert.BACKPRESSURE,
                "stop_file",
                f"{self.ws.rel(self.ws.stop_file)} was found before {when}; the loop stopped as asked.",
            )
        elif self.budget.remaining() <= 0:
            state.end(
                cert.TIMEOUT,
                "wall_budget",
                f"The {self.budget.total:g} s budget ({self.budget.source}) was spent before {what} passed.",
            )
        elif state.total >= cfg.max_iterations:
            state.end(
                cert.TIMEOUT,
                "max_iterations",
                f"All {cfg.max_iterations} iterations (`[agent] max_iterations`) were spent before {what} passed.",
            )
        elif (slot := self.limiter.next_slot(time.time())) is not None:
            why = f"{cfg.calls_per_hour} agent calls in the last hour (`[agent] calls_per_hour`)"
            return self.wait(state, "rate_limit", why, iso_utc(slot))
        return None

    def prepare(self, state: LoopState, task: MicroTask, level: AgentLevel) -> tuple[LedgerStep, IterationEvidence]:
        """The iteration's prompt (the same one again on a retry), its ledger step keyed by
        the prompt's hash, and FR-EVT-MT-002."""
        iteration = state.next_iteration
        step_id = self.step_id(state)
        ev = IterationEvidence(self.run_dir, task.mt_id, iteration)
        text = self.prompt_once(ev, step_id, lambda: self.build_prompt(state, task.index, iteration, level))
        sha = hashlib.sha256(text.encode()).hexdigest()
        step = self.start_step(step_id, "agent", task.mt_id, str(iteration), str(state.level), sha)
        self.publish(state, live=True)
        self.emit(
            "micro_task_iteration_started",
            "FR-EVT-MT-002",
            mt=task.mt_id,
            iteration=iteration,
            level=state.level,
            agent=level.name,
        )
        return step, ev

    def prompt_once(self, ev: IterationEvidence, step_id: str, build: Callable[[], str]) -> str:
        """The step's prompt: built and kept in its evidence the first time, the kept one on
        a retry (the same prompt, so the same idempotency key)."""
        path = ev.path("prompt.md")
        if self.ctx.ledger.step(step_id) is not None and path.exists():
            text = path.read_text(encoding="utf-8")
            ev.add(path, text.encode("utf-8"))
            return text
        text = build()
        ev.write("prompt.md", text)
        return text

    def run_checks(self, mt_index: int, step_id: str, dead: frozenset[int] = frozenset()) -> list[CheckRun] | None:
        """The engine's own verdict: every check of the micro-task, run by the engine.
        None when a second stop signal or a cancel interrupted them."""
        checks = []
        for block in self.plan.checks_for(self.mp, mt_index, dead):
            chk = iter_check(block, step_id)
            run = run_block(self.checks_ctx, chk)
            if run.interrupted or run.cancelled:
                return None
            checks.append((chk, run.ok, run.report.exit_code))
        return checks

    def build_prompt(self, state: LoopState, mt_index: int, iteration: int, level: AgentLevel) -> str:
        task = self.plan.tasks[mt_index]
        checks = self.plan.checks_for(self.mp, mt_index, state.dead)
        ts = state.tasks[mt_index]
        previous = ts.records[-1] if ts.records else None
        tails = self.failing_tails(previous) if previous is not None else {}
        last = state.level + 1 >= len(state.levels)  # nowhere to escalate to
        build = partial(
            prompt.build,
            mp=self.mp,
            plan=self.plan,
            task=task,
            iteration=iteration,
            level=state.level,
            level_name=level.name,
            nonce=self.progress.nonce,
            workspace=str(self.work_root),
            checks=checks,
            previous=previous,
            tails=tails,
            learnings=learnings.read(self.learnings_path),
            statuses={t.mt_id: t.status for t in state.tasks},
            budget=prompt.Budget(
                iterations_left=self.cfg.max_iterations - state.total,
                max_iterations=self.cfg.max_iterations,
                seconds_left=self.budget.remaining(),
                seconds_total=self.budget.total,
                fails_before_escalation=None if last else self.cfg.fail_threshold - state.fails_at_level,
            ),
        )
        return workcontext.fill(
            self.cfg.token_budget, lambda context: build(context=context), task.text, self.worktree_map
        )

    def failing_tails(self, record: dict[str, Any]) -> dict[str, str]:
        """{check id: the end of its stdout and stderr} for each check an iteration failed,
        at most `[agent] output_tail_bytes` each."""
        cap = self.cfg.output_tail_bytes
        tails = {}
        for c in record["checks"]:
            if not c["ok"]:
                parts = [
                    read_tail(self.ctx.run.steps_dir / f"{c['step']}.{suffix}", cap) for suffix in ("stdout", "stderr")
                ]
                tails[c["id"]] = "\n".join(p for p in parts if p)[-cap:]
        return tails

    def worktree_map(self) -> RepoMap:
        """The work branch's repository map, cached for the run (refreshed at each use)."""
        if self.repomap is None or self.repomap.root != self.work_root:
            self.repomap = RepoMap(self.work_root, self.work.map_cache)
        return self.repomap

    def checkpoint(self) -> None:
        """Make the finished iteration's ledger entry durable (one fsync, not one per file).

        Everything else of the iteration (record, evidence, events) is written without
        fsync: it survives `kill -9`. After a power loss, an iteration whose record did not
        reach the disk has no artifact, so recovery runs it again (same prompt, same key)."""
        self.ctx.ledger.save(durable=True)

    def release(self, step: LedgerStep) -> None:
        """Put a started iteration back to pending: it runs again, with the same prompt."""
        step.status = StepStatus.PENDING
        step.pgid = step.proc_start = None
        self.ctx.ledger.save()

    def act(self, state: LoopState, effects: list[Effect]) -> None:
        for e in effects:
            if e.kind == "event":
                self.emit(e.name, e.event_id, **e.fields)
                if e.name == "micro_task_complete":
                    self.commit_task(state, e.fields["mt"])
            elif e.kind == "distill":
                self.distill(state, e.fields["mt_index"], emit=True)
