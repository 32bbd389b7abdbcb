"""The engine's side of the fleet: `Fleet` is the connection (one event loop in a thread
of its own, for the daemon's life); `FleetRunner` runs one MP's attempts on it, called
from the scheduler's worker threads (agent/run/scheduler.py) as the local runner would be.

An attempt: the task's worktree goes to the work remote as a commit (snapshot.py); the
attempt starts under its id (`mp-engine/<run>/<MT>/<n>`, spec.py), or, when Temporal
already has that id (the engine restarted), the runner attaches to it; it waits,
telling `status` where the attempt runs; then it brings the outcome home: the worker's
commit laid into the task's worktree, the call's output as the iteration's evidence, the
checks as ledger steps of this run, and the same judgement as a local attempt
(`attempt.judge`).

Temporal lost mid-run: the MP stays RUNNING, `status` says "waiting for Temporal at
ADDR", the runner retries with backoff; a result comes only from an attempt that ended.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import CancelledError, TemporalError, TerminatedError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from mp_engine.agent.api import (
    AgentSteps,
    Attempt,
    AttemptOutcome,
    Call,
    CallKind,
    CheckRun,
    TaskWorktrees,
    WorkspaceParts,
    iter_check,
    judge,
    protect,
)
from mp_engine.config.fleet import FleetConfig
from mp_engine.config.load import Config
from mp_engine.core import secretenv
from mp_engine.core.atomic import atomic_write, atomic_write_json
from mp_engine.core.errors import ConfigError, RemoteUnreachable
from mp_engine.core.gitcmd import GitFailed
from mp_engine.execute.steps import StepContext, block_key
from mp_engine.fleet import snapshot
from mp_engine.fleet.spec import WORKFLOW, AttemptResult, AttemptSpec, CheckOutcome, attempt_id
from mp_engine.fleet.temporal import Poller, connect, pollers, queues
from mp_engine.record.ledger import LedgerStep, write_artifact

T = TypeVar("T")
POLL = 0.25  # seconds between looks at a stop while an attempt runs
DESCRIBE_EVERY = 2.0  # seconds between asking Temporal where an attempt runs
BACKOFF_MAX = 30.0
CANCEL_WAIT = 60.0  # seconds a cancelled attempt may take to stop its worker's processes


def _fleet_runs(step: LedgerStep) -> int:
    """The runs of the step's attempt the engine gave back: an extra field of its ledger step."""
    return int((step.model_extra or {}).get("fleet_runs") or 0)


class Fleet:
    """The connection to Temporal: `connect` once (FleetUnreachable, exit 2, when it does
    not answer), then `runner` for each MP."""

    def __init__(self, cfg: FleetConfig, environ: Mapping[str, str], remote: str):
        """`remote`: where the engine pushes tasks' work for the workers (a URL or the name
        of a remote of the workspace's repository)."""
        self.cfg = cfg
        self.environ = environ
        self.remote = remote
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="mp-fleet", daemon=True)
        self.client: Client | None = None

    def connect(self) -> Fleet:
        if not self.thread.is_alive():
            self.thread.start()
        if self.client is None:
            self.client = self.run(connect(self.cfg, self.environ))
        return self

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def pollers(self) -> dict[str, list[Poller]]:
        """Every queue the engine sends to, with the workers polling it."""
        assert self.client is not None
        client = self.client
        return {q: self.run(pollers(client, q), self.cfg.connect_timeout) for q in queues(self.cfg)}

    @classmethod
    def of(cls, config: Config) -> Fleet:
        remote = config.fleet.work_remote or (config.git.remote if config.git.enabled else "")
        if not remote:
            raise ConfigError(
                "[fleet] needs a repository the workers can reach. Fix: set [fleet] work_remote to its URL, "
                "or enable [git] with a remote (docs/FLEET.md)."
            )
        return cls(config.fleet, secretenv.environ(), remote)

    def runner(self, ctx: StepContext, trees: TaskWorktrees) -> FleetRunner:
        """An MP's attempts on the fleet (agent.parallel.Dispatch)."""
        return FleetRunner(self.connect(), ctx, trees, self.remote)

    def close(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)


class FleetRunner:
    """One MP's attempts on the fleet (an `agent.attempt.Runner`)."""

    def __init__(self, fleet: Fleet, ctx: StepContext, trees: TaskWorktrees, remote: str):
        self.fleet = fleet
        self.cfg = fleet.cfg
        self.ctx = ctx
        self.trees = trees
        self.remote = remote
        self.mp_text = ctx.run.mp_copy.read_text(encoding="utf-8")
        self._where: dict[str, str] = {}
        self.pushed: set[str] = set()

    def where(self, mt_id: str) -> str | None:
        return self._where.get(mt_id)

    def close(self) -> None:
        """The task branches this run pushed leave the work remote (best effort)."""
        for branch in sorted(self.pushed):
            snapshot.delete(self.trees.work.path, self.remote, branch)
        self.pushed.clear()

    # -- one attempt -------------------------------------------------------------------

    def __call__(self, parts: WorkspaceParts, a: Attempt) -> AttemptOutcome:
        steps = parts.run.steps
        # The step's runs the engine gave back (a stop, a usage limit) each had an id of
        # their own; a crash gave nothing back, so a restart finds its attempt again.
        done = _fleet_runs(a.step)
        try:
            out = self._attempt(parts, steps, a, done)
        finally:
            self._where.pop(a.mt_id, None)
        if not out.answered:
            self._gave_back(steps, a, _fleet_runs(a.step))  # runs again under a new id
        return out

    def _attempt(self, parts: WorkspaceParts, steps: AgentSteps, a: Attempt, done: int) -> AttemptOutcome:
        while True:
            wid = attempt_id(self.ctx.run.run_id, a.mt_id, a.iteration, done + 1)
            got = self._wait(self._spec(parts, a, wid), parts.caller.stop_now, parts, a)
            if got != "again":  # "again": it ended without a result, not asked by this engine
                break
            done = self._gave_back(steps, a, done)
        if isinstance(got, AttemptResult) and self._fetched(a, got, parts.caller.stop_now):
            return self._home(parts, a, got, wid)
        if isinstance(got, Call):  # the fleet failed it
            return AttemptOutcome(got)
        assert got is None or isinstance(got, AttemptResult), got  # stopped
        return AttemptOutcome(Call(CallKind.INTERRUPTED, detail="stopped on the fleet"))

    @staticmethod
    def _gave_back(steps: AgentSteps, a: Attempt, done: int) -> int:
        extra = a.step.model_extra
        assert extra is not None  # a ledger step allows extra fields (record/ledger.py): this is one
        extra["fleet_runs"] = done + 1
        steps.ledger.save()
        return done + 1

    def _spec(self, parts: WorkspaceParts, a: Attempt, wid: str) -> AttemptSpec:
        return AttemptSpec(
            attempt_id=wid,
            mp_id=self.ctx.mp.mp_id,
            run_id=self.ctx.run.run_id,
            mt_id=a.mt_id,
            mt_index=a.mt_index or 0,
            iteration=a.iteration,
            level_name=a.level.name,
            level_index=a.level_index,
            step_id=a.step.step_id,
            idempotency_key=a.step.idempotency_key,
            prompt=a.ev.path("prompt.md").read_text(encoding="utf-8"),
            mp_text=self.mp_text,
            accepting=list(a.accepting),
            branch=self.trees.branch(a.mt_id),
            commit="",  # set when it starts (a re-attached attempt keeps the one it had)
            budget=max(1.0, self.ctx.budget.remaining()),
            queue=self.cfg.queue_for(a.level.name),
            heartbeat_timeout=self.cfg.heartbeat_timeout,
            max_tries=self.cfg.max_tries,
        )

    def _wait(self, spec: AttemptSpec, stop: threading.Event, parts: WorkspaceParts, a: Attempt) -> Any:
        """The attempt's result; None when stopped; a Call when the fleet failed it or the
        engine's budget refused it; "again" when it ended cancelled or terminated by someone else."""
        mt, backoff = spec.mt_id, 1.0
        handle: WorkflowHandle[Any, Any] | None = None
        result: Future[AttemptResult] | None = None
        next_describe = 0.0
        while True:
            try:
                if stop.is_set():
                    self._cancel(handle, result)
                    return None
                if handle is None:
                    started = self._start_or_attach(spec, parts, a)
                    if isinstance(started, Call):  # the engine's budgets hold every worker's calls (issue #42)
                        return started
                    handle = started
                    result = self.fleet.submit(handle.result(follow_runs=False))
                    self._where[mt] = f"queued on {spec.queue}"
                assert result is not None
                try:
                    return result.result(timeout=POLL)
                except TimeoutError:
                    pass
                if time.monotonic() >= next_describe:
                    self._where[mt] = self._describe(handle, spec.queue)
                    next_describe = time.monotonic() + DESCRIBE_EVERY
                backoff = 1.0
            except WorkflowFailureError as e:
                return self._failed(e, spec)
            except GitFailed as e:  # the work remote refused the task's commit: a person must look
                return Call(CallKind.FLEET, detail=f"the work remote {self.remote} refused the task's work: {e}")
            except (RPCError, TimeoutError, RemoteUnreachable) as e:  # Temporal or the work remote is away
                if isinstance(e, RPCError) and e.status == RPCStatusCode.NOT_FOUND:  # forgotten (retention)
                    return "again"
                if result is not None:
                    result.cancel()
                handle = result = None
                self._where[mt] = (
                    f"waiting for the work remote {self.remote}"
                    if isinstance(e, RemoteUnreachable)
                    else f"waiting for Temporal at {self.cfg.temporal}"
                )
                self.ctx.events.emit(
                    "fleet_waiting",
                    mp=spec.mp_id,
                    mt=mt,
                    attempt=spec.attempt_id,
                    waiting_for=self._where[mt],
                    error=str(e)[:300] or type(e).__name__,
                    retry_in=backoff,
                )
                if stop.wait(backoff):
                    return None
                backoff = min(BACKOFF_MAX, backoff * 2)

    def _start_or_attach(self, spec: AttemptSpec, parts: WorkspaceParts, a: Attempt) -> WorkflowHandle[Any, Any] | Call:
        """The attempt Temporal has under this id (a restarted engine re-attaches), or a
        new one from the task's worktree as it is now; a `budget` call when the engine's
        budgets refuse a new one (the spend of every worker is charged here, `_home`)."""
        client = self.fleet.client
        assert client is not None
        handle = client.get_workflow_handle(spec.attempt_id, result_type=AttemptResult)
        try:
            self.fleet.run(handle.describe(), self.cfg.connect_timeout)
            self.ctx.events.emit("fleet_attached", mp=spec.mp_id, mt=spec.mt_id, attempt=spec.attempt_id)
            return handle
        except RPCError as e:
            if e.status != RPCStatusCode.NOT_FOUND:
                raise
        spending = parts.run.spending
        refused = spending.refusal(a.level, spec.prompt) if spending is not None else None
        if refused is not None:
            return refused
        workdir = parts.caller.workdir
        spec.commit = snapshot.snapshot(workdir, f"{spec.mp_id} {spec.mt_id} before iteration {spec.iteration}")
        snapshot.push(workdir, self.remote, spec.commit, spec.branch)
        self.pushed.add(spec.branch)
        parts.caller.limiter.record(time.time())
        try:
            handle = self.fleet.run(
                client.start_workflow(
                    WORKFLOW,
                    spec,
                    id=spec.attempt_id,
                    task_queue=spec.queue,
                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                    result_type=AttemptResult,
                ),
                self.cfg.connect_timeout,
            )
        except WorkflowAlreadyStartedError:
            handle = client.get_workflow_handle(spec.attempt_id, result_type=AttemptResult)
        self.ctx.events.emit(
            "fleet_started", mp=spec.mp_id, mt=spec.mt_id, attempt=spec.attempt_id, queue=spec.queue, commit=spec.commit
        )
        return handle

    def _describe(self, handle: WorkflowHandle[Any, Any], queue: str) -> str:
        desc = self.fleet.run(handle.describe(), self.cfg.connect_timeout)
        for act in desc.raw_description.pending_activities:
            try_n = f" (try {act.attempt})" if act.attempt > 1 else ""
            if act.last_worker_identity and act.state == 2:  # PENDING_ACTIVITY_STATE_STARTED
                return f"on {act.last_worker_identity}{try_n}"
            return f"queued on {queue}{try_n}"
        return f"queued on {queue}"

    def _cancel(self, handle: WorkflowHandle[Any, Any] | None, result: Future[AttemptResult] | None) -> None:
        """Stop the attempt on its worker (its process group is killed) and wait for it."""
        if handle is None:
            return
        try:
            self.fleet.run(handle.cancel(reason="the engine stopped the MP"), self.cfg.connect_timeout)
            if result is not None:
                result.result(timeout=CANCEL_WAIT)
        except Exception:  # noqa: BLE001 - cancelled, failed or unreachable: it is stopped or will be
            pass

    def _failed(self, e: WorkflowFailureError, spec: AttemptSpec) -> Any:
        cause: BaseException | None = e.cause
        while (
            isinstance(cause, TemporalError)
            and cause.cause is not None
            and not isinstance(cause, CancelledError | TerminatedError)
        ):
            cause = cause.cause
        if isinstance(cause, CancelledError | TerminatedError):
            return "again"
        detail = f"attempt {spec.attempt_id} failed on every try ({spec.max_tries}, `[fleet] max_tries`): {cause}"
        self.ctx.events.emit("fleet_failed", mp=spec.mp_id, mt=spec.mt_id, attempt=spec.attempt_id, error=str(cause))
        return Call(CallKind.FLEET, detail=detail[:1000])

    # -- home --------------------------------------------------------------------------

    def _fetched(self, a: Attempt, got: AttemptResult, stop: threading.Event) -> bool:
        """The worker's commit is here (False: stopped while the work remote was away)."""
        backoff = 1.0
        while got.commit:
            try:
                snapshot.fetch(
                    self.trees.path(a.mt_id),
                    self.remote,
                    self.trees.branch(a.mt_id),
                    got.commit,
                    f"refs/mp-engine/{a.mt_id}",
                )
                return True
            except RemoteUnreachable as e:
                self._where[a.mt_id] = f"waiting for the work remote {self.remote}"
                self.ctx.events.emit(
                    "fleet_waiting",
                    mp=self.ctx.mp.mp_id,
                    mt=a.mt_id,
                    waiting_for=self._where[a.mt_id],
                    error=str(e)[:300],
                    retry_in=backoff,
                )
                if stop.wait(backoff):
                    return False
                backoff = min(BACKOFF_MAX, backoff * 2)
        return True

    def _home(self, parts: WorkspaceParts, a: Attempt, got: AttemptResult, wid: str) -> AttemptOutcome:
        """The worker's outcome as if the attempt had run here (its commit fetched)."""
        if got.commit:
            snapshot.adopt(parts.caller.workdir, got.commit)
        ev = a.ev
        note = f"[first {got.stdout_omitted} bytes on the worker only]\n" if got.stdout_omitted else ""
        atomic_write(ev.path("stdout.txt"), note + got.stdout, durable=False)
        atomic_write(ev.path("stderr.txt"), got.stderr, durable=False)
        call, spending = Call.from_dict(got.call), parts.run.spending
        if spending is not None:  # priced with the engine's table, charged once its record is written
            spending.price(call, a.level)
        if not call.pauses:
            atomic_write_json(
                ev.path("call.json"),
                {"idempotency_key": a.step.idempotency_key, "call": call.to_dict(), "worker": got.worker},
                durable=False,
            )
        if spending is not None:
            key = f"{self.ctx.run.run_id}/{a.step.idempotency_key}"
            spending.charge(key if not call.pauses else f"{key}#{wid}", call, a.level)
        self.ctx.events.emit(
            "fleet_finished",
            mp=self.ctx.mp.mp_id,
            mt=a.mt_id,
            attempt=wid,
            worker=got.worker,
            tries=got.tries,
            call=call.kind,
            commit=got.commit,
        )
        if call.pauses or call.ends_run:
            return AttemptOutcome(call)
        if got.checks_interrupted:
            return AttemptOutcome(call, checks_interrupted=True)
        checks = [self._check(parts, a, c) for c in got.checks]
        # What the worker restored, and what the engine finds changed of its own protected set.
        out = judge(parts, a, call, checks, sorted({*got.protected, *protect(parts, a)}))
        assert out.evidence is not None
        out.evidence.update(worker=got.worker, attempt=wid, tries=got.tries)
        return out

    def _check(self, parts: WorkspaceParts, a: Attempt, c: CheckOutcome) -> CheckRun:
        """A check the worker ran, as a ledger step of this run with its outputs."""
        ctx = parts.checker.ctx
        chk = iter_check(ctx.mp.checks[c.index], a.step.step_id)
        step = ctx.ledger.ensure_step(chk.step_id, "check", block_key(ctx.mp, chk))
        ctx.ledger.start(step)
        steps_dir = ctx.run.steps_dir
        atomic_write(steps_dir / f"{chk.step_id}.stdout", c.stdout, durable=False)
        atomic_write(steps_dir / f"{chk.step_id}.stderr", c.stderr, durable=False)
        ref = write_artifact(steps_dir, step, c.artifact, durable=False)
        summary = (c.artifact.get("diagnosis") or {}).get("summary")
        ctx.ledger.finish(step, ok=c.ok, output_ref=ref, error=None if c.ok else summary or f"exit code {c.exit_code}")
        ctx.events.emit(
            "step_finished",
            mp=ctx.mp.mp_id,
            run=ctx.run.run_id,
            step=chk.step_id,
            ok=c.ok,
            exit_code=c.exit_code,
            duration=c.artifact.get("duration"),
            worker=c.artifact.get("worker"),
        )
        return chk, c.ok, c.exit_code
