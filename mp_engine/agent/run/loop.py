"""The agent run (`Executor: agent`): a coding-agent CLI driven through a bounded, verified
loop whose "done" is the engine's own checks (docs/AGENT.md). `AgentRun` keeps what is the
run's alone: its preconditions (NEED_INFO before anything runs), its progress file and
baseline, its state as the replay of its ledger (state/apply.py), the answers a person gave,
and starting the one scheduler (scheduler.py) with where its tasks work (placement.py: the
run's worktree one at a time, or a worktree each) and where their attempts run (a `Runner`:
here, or the fleet). At the end, the publisher writes its certificate and lands its work.

Each iteration is one ledger step `MT-001_iter-002` whose idempotency key hashes the MT id,
iteration, level and prompt; its artifact is the iteration record, so an iteration that
finished is never run again.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping

from mp_engine.agent.call.budget import Spending
from mp_engine.agent.call.limiter import CallLimiter
from mp_engine.agent.evidence import Snapshot, Worktree
from mp_engine.agent.memory.distill import distill, distilled
from mp_engine.agent.memory.lessons import snapshot
from mp_engine.agent.plan.decompose import Plan, decompose, goal_of
from mp_engine.agent.progress import BASELINE_FILE, Progress
from mp_engine.agent.run import answers, reviews
from mp_engine.agent.run.attempt import Local, Runner
from mp_engine.agent.run.guard import Halt
from mp_engine.agent.run.placement import InPlace, Placement, Worktrees
from mp_engine.agent.run.publisher import Publisher, iso_utc, missing, need_info
from mp_engine.agent.run.pullrequest import PullRequestRounds
from mp_engine.agent.run.repo import RepoLanding, RepoRun
from mp_engine.agent.run.resume import records, report_resume
from mp_engine.agent.run.scheduler import Scheduler
from mp_engine.agent.run.sidesteps import SideSteps
from mp_engine.agent.run.steps import AgentSteps
from mp_engine.agent.run.workbranch import NoGit, WorkBranch
from mp_engine.agent.run.worktrees import TaskWorktrees
from mp_engine.agent.scope import RunScope
from mp_engine.agent.state.apply import replay
from mp_engine.agent.state.kinds import TaskStatus
from mp_engine.agent.state.model import RunState
from mp_engine.config.agent import AgentConfig
from mp_engine.core.atomic import atomic_write_json
from mp_engine.core.errors import BranchMissing, CredentialsRefused, RemoteUnreachable, SyncError
from mp_engine.execute.base import ExecResult
from mp_engine.execute.steps import StepContext, wall_used
from mp_engine.forge.repository import Repository
from mp_engine.forge.watch import WatchList
from mp_engine.inbox.mpfile import MicroProject
from mp_engine.record.diagnosis import Diagnosis

# Where a run's attempts run when not in this engine's threads (the fleet, `[fleet]`): made
# for the run's scope and its tasks' worktrees.
Dispatch = Callable[[StepContext, TaskWorktrees], Runner]


def _refused(kind: str, what: str, e: Exception, fix: str) -> ExecResult:
    """The run ends before it starts: the repository it works on cannot be used as it is."""
    return ExecResult(status="failed", diagnosis=Diagnosis(kind, what, str(e), fix))


def parallel_limit(cfg: AgentConfig, mp: MicroProject) -> int:
    """Tasks of this MP at once: `[agent] max_parallel`, which a `Max-Parallel:` header may
    lower (never raise)."""
    return max(1, min(cfg.max_parallel, int(mp.headers.get("Max-Parallel", cfg.max_parallel))))


class AgentRun:
    """One MP's run; rebuilt from the run archive on every (re-)entry."""

    def __init__(
        self, ctx: StepContext, dispatch: Dispatch | None = None, repos: Mapping[str, Repository] | None = None
    ):
        """`repos`: the configured repositories (`[repos.NAME]`), for an MP's `Repo:`."""
        self.ctx = ctx
        self.dispatch = dispatch
        self.cfg = ctx.config.agent
        self.mp = ctx.mp
        # `Plan: auto` (or `[agent] plan`): a planner level plans the tasks (sidesteps.py);
        # `Plan: review`: and each plan waits for a person's approval (state/approval.py).
        self.planned = (ctx.mp.headers.get("Plan") or self.cfg.plan) in ("auto", "review")
        self.first_plan: Plan = goal_of(ctx.mp) if self.planned else decompose(ctx.mp)
        self.run_dir = ctx.run.dir
        # Tasks at once: `[agent] max_parallel`, lowered by `Max-Parallel:`; kept in the
        # run's progress so a restart goes on as the run began.
        started = Progress.load(self.run_dir)
        self.limit = (started.data.get("parallel") if started else None) or parallel_limit(self.cfg, ctx.mp)
        # The agent, its checks and the evidence work in the MP's own worktree on branch
        # mp/<MP-id> (workbranch.py), set up when the run starts; tasks at once each in a
        # worktree of their own (worktrees.py) beside it, as do tasks whose attempts run on a
        # fleet of workers (`dispatch`), even one at a time.
        self.isolated = self.limit > 1 or dispatch is not None
        self.work = WorkBranch(ctx.ws, ctx.mp.mp_id, ctx.run.run_id, parallel=self.isolated)
        self.steps = AgentSteps(ctx.ledger, ctx.run.steps_dir)
        # `Repo: NAME` (issue #41): the work is on that repository's mirror, and lands there.
        name = ctx.mp.repo
        self.repo = (
            RepoRun(repos[name], mp_id=ctx.mp.mp_id, base=ctx.mp.headers.get("Base"), issue=ctx.mp.headers.get("Issue"))
            if name is not None and repos is not None and name in repos
            else None
        )

    def emit(self, name: str, **fields: object) -> None:
        self.ctx.events.emit(name, mp=self.mp.mp_id, run=self.ctx.run.run_id, **fields)

    def run(self) -> ExecResult:
        refused = self._preconditions()
        if refused is not None:
            return refused
        progress, base, fresh = self._progress()
        limiter = CallLimiter(self.ctx.ws.local_dir / "agent_calls.log", self.cfg.calls_per_hour)
        memory = snapshot(self.ctx.ws, self.run_dir, self.cfg.memory)
        learnings = self.run_dir / "agent" / "learnings.md"
        spending = Spending.at(self.ctx.ws.local_dir, self.cfg, mp_id=self.mp.mp_id, emit=self.emit)  # every MP's
        run = RunScope(self.ctx, self.cfg, progress.nonce, self.steps, limiter, learnings, memory, spending)
        # `halt`: the tasks' work stops when the run ends or the engine stops it (a cancel, a
        # second signal); the scheduler charges the run's wall time, shared by its tasks.
        halt = Halt(self.ctx.stop_now)
        tasks = run.beside(stop_now=halt, budget=self.ctx.budget.shared())
        placement = self._placement(tasks, base)
        state = RunState.begin(
            self.cfg,
            self.first_plan,
            progress.data["base"]["digest"],
            planned=self.planned,
            isolated=placement.isolated,
        )
        replay(state, records(self.ctx.ledger, self.ctx.run.steps_dir))
        publisher = Publisher(run, progress, self.work)
        runner: Runner = Local()
        if self.dispatch is not None and isinstance(placement, Worktrees):
            runner = self.dispatch(self.ctx, placement.trees)
        scheduler = Scheduler(
            run,
            halt=halt,
            placement=placement,
            runner=runner,
            publisher=publisher,
            sides=SideSteps(placement.home(), publisher),
        )
        scheduler.act(state, answers.take(state, self.steps, self.run_dir))  # a person answered the task it ended on
        if any(t.answers for t in state.tasks):
            self.work.uncommit_leftovers()
        scheduler.act(state, reviews.take(state, self.steps, self.run_dir))  # a reviewer asked for more
        rounds = self._landing(run, publisher)  # the pull request's session, as the ledger has it now
        self.ctx.budget.used = wall_used(self.ctx.ledger.model.steps)  # the union of what ran, not its sum
        self._announce(run, state, progress, fresh)
        # Per-iteration writes skip fsync; `AgentSteps.checkpoint` makes each finished step
        # durable at once (a power loss costs at most the running iteration).
        self.ctx.ledger.durable, self.ctx.ledger.deferred = False, True
        try:
            while True:  # a pull request's CI may send the run back to work (run/repo.py)
                paused = scheduler.run(state)
                if paused is not None:
                    return paused
                waiting = rounds.round(state) if rounds is not None else None
                if waiting is not None:
                    return waiting
                if state.final is not None:
                    break
            return publisher.finish(state, self.ctx, distilled(self.ctx.ws, self.ctx.run.run_id, state.tasks))
        finally:
            self.ctx.ledger.durable, self.ctx.ledger.deferred = True, False
            self.ctx.events.sync()
            self.ctx.ledger.save(durable=True)

    def _preconditions(self) -> ExecResult | None:
        """NEED_INFO before anything runs; otherwise the worktree, made (or found) now."""
        lacking = missing(self.cfg, self.mp, self.first_plan, self.planned)
        if lacking is None and self.repo is not None:
            away = self._on_repository()
            if away is not None:
                return away
        if lacking is None:
            try:
                self.work.ensure(resumed=Progress.load(self.run_dir) is not None)
            except NoGit as e:
                lacking = (
                    "no_git",
                    f"An agent MP works on a branch of its own (mp/<MP-id>), so the workspace must be a git "
                    f"repository with at least one commit, and {e}.",
                )
        if lacking is None:
            return None
        run_rel = self.ctx.ws.rel(self.run_dir)
        return need_info(
            *lacking, mp=self.mp, plan=self.first_plan, run_dir=self.run_dir, run_rel=run_rel, emit=self.emit
        )

    def _on_repository(self) -> ExecResult | None:
        """The work branch on the repository's mirror, brought up to date; a repository that
        cannot be reached makes the run wait (the engine comes back to it); one that refuses
        the engine's credentials, has no such base, or fails otherwise ends it with the fix."""
        assert self.repo is not None
        name = self.repo.repo.name
        try:
            where = self.repo.where()
        except RemoteUnreachable as e:
            resume_at = iso_utc(time.time() + 60)
            why = f"[repos.{name}] could not be reached: {e}"
            return ExecResult(
                status="waiting", extra={"waiting": {"kind": "repository", "reason": why, "resume_at": resume_at}}
            )
        except CredentialsRefused as e:
            fix = (
                f"Give the token [repos.{name}] token_env names Contents read and write on "
                f"{self.repo.cfg.url} (docs/PULL_REQUESTS.md), then send the MP again."
            )
            return _refused("repository_refused", f"[repos.{name}] refused the engine", e, fix)
        except BranchMissing as e:
            fix = f"Send the MP again with a `Base:` that exists, or set [repos.{name}] base to one."
            return _refused("repository_base", f"[repos.{name}] has no such base branch", e, fix)
        except SyncError as e:
            fix = f"Run `git --git-dir {self.repo.repo.mirror.git_dir} fsck` and fix what it says, then send the MP again."
            return _refused("repository_git", f"git failed on [repos.{name}]'s mirror", e, fix)
        self.work = WorkBranch(self.ctx.ws, self.mp.mp_id, self.ctx.run.run_id, parallel=self.isolated, where=where)
        return None

    def _landing(self, run: RunScope, publisher: Publisher) -> PullRequestRounds | None:
        """For `Repo:`, how the work lands there (the publisher's lander), and the pull
        request's rounds when it lands as one."""
        if self.repo is None:
            return None
        rounds = None
        if self.repo.cfg.land == "pull_request":
            rounds = PullRequestRounds(
                self.repo,
                self.work,
                self.steps,
                publisher,
                run_id=self.ctx.run.run_id,
                title=self.mp.title,
                redact=self.ctx.events.redact,
                emit=run.emit,
                watch=WatchList.at(self.ctx.ws.local_dir),
            )
        publisher.lander = RepoLanding(self.repo, self.work, rounds)
        return rounds

    def _progress(self) -> tuple[Progress, Snapshot, bool]:
        """The run's progress file and the workspace as the run found it (made on its first
        entry): (progress, baseline, whether this entry is the first)."""
        progress = Progress.load(self.run_dir)
        if progress is not None:
            raw = json.loads((self.run_dir / BASELINE_FILE).read_text(encoding="utf-8"))
            return progress, Snapshot(raw["head"], raw["files"]), False
        base = Worktree(self.work.path).snapshot()
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
        return progress, base, True

    def _placement(self, tasks: RunScope, base: Snapshot) -> Placement:
        if not self.isolated:
            return InPlace(tasks, self.work, base)
        slots = threading.Semaphore(self.cfg.max_parallel_checks or os.cpu_count() or 1)
        return Worktrees(tasks, self.work, self.limit, slots, base)

    def _announce(self, run: RunScope, state: RunState, progress: Progress, fresh: bool) -> None:
        """The run started (FR-EVT-MT-001), or where it resumes; after a crash, a candidate
        that came between a task's success and its distillation is written."""
        if fresh:
            routes = {r.domain: [lv.name for lv in r.levels] for r in self.cfg.routes}
            run.emit(
                "micro_task_loop_started",
                id="FR-EVT-MT-001",
                mt=state.task.mt_id if state.task else None,
                iteration=state.next_iteration,
                level=state.level,
                micro_tasks=[t.mt_id for t in state.plan.tasks],
                planned=self.planned,
                levels=[lv.name for lv in self.cfg.levels],
                **({"routes": routes} if routes else {}),
                **({"parallel": self.limit} if self.isolated else {}),
            )
            return
        report_resume(state, progress, self.ctx.ledger, run.emit)
        for i, task in enumerate(state.tasks):
            if task.status is TaskStatus.COMPLETED and (task.final_level or 0) > 0:
                distill(run, task=task, chain=state.chains[i], announce=False)
        progress.save()
