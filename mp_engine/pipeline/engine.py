"""The engine: one MP-1.3 pass in `tick()` (claim -> drive -> finalize). The loop that
repeats it, the watchers and the supervisor live in daemon/; the engine knows none of them.

A tick, under the workspace lock:
  1. poll the channel when due (a sync problem ends as an ERROR result);
  2. finish or resume any run a crash or a stop left open (the ledger says where);
  3. otherwise, if the inbox holds a complete MP: read and parse it (never run half an MP),
     admit it (validation, signatures, a halt), claim it (RUNNING), execute it;
  4. record the outcome in the ledger and finalize: result, state, inbox cleared, push.
Step 4 is idempotent, so a crash anywhere in it is finished on the next tick.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import structlog

from mp_engine import __version__
from mp_engine.agent.api import AgentExecutor
from mp_engine.config.load import Config
from mp_engine.core import secretenv
from mp_engine.core.atomic import sweep_temp_files
from mp_engine.core.clock import now_iso, seconds_until
from mp_engine.core.disk import Reserve
from mp_engine.core.errors import InvalidMPError, LockTimeout, MpEngineError
from mp_engine.core.events import EventLog
from mp_engine.core.lock import WorkspaceLock
from mp_engine.core.pids import pid_alive
from mp_engine.core.workspace import EVENTS_FILE, Workspace, move_legacy_event_log
from mp_engine.execute.base import Executor
from mp_engine.execute.sandbox import require as require_sandbox
from mp_engine.execute.shell import ShellExecutor
from mp_engine.forge.repository import open_repositories
from mp_engine.inbox.answer import pending as pending_answer
from mp_engine.inbox.answer import requested as answer_requested
from mp_engine.inbox.cancel_request import pending as pending_cancels
from mp_engine.inbox.cancel_request import requested as cancel_requested
from mp_engine.inbox.intake import Entry, Inbox, Signature
from mp_engine.inbox.mpfile import MicroProject, parse
from mp_engine.inbox.queue import SEEN
from mp_engine.pipeline import answering, synced
from mp_engine.pipeline.admit import Ended, Held, Refused, admit, executor_for
from mp_engine.pipeline.cancel_waiting import settle as settle_cancels
from mp_engine.pipeline.claim import claim, reject, reopen
from mp_engine.pipeline.context import Action, EngineContext, TickResult
from mp_engine.pipeline.drive import drive
from mp_engine.pipeline.finalize import finalize
from mp_engine.pipeline.issuing import Issuing
from mp_engine.pipeline.queued import take_queued
from mp_engine.pipeline.reviewing import Reviewing
from mp_engine.record import diagnosis as diag
from mp_engine.record.archive import RunArchive, open_runs, sweep_incomplete_runs, sweep_unfilled_runs
from mp_engine.record.state import IDLE, SessionState, StateStore, Status
from mp_engine.record.unrun import error_run
from mp_engine.sync.channel import Channel, GitChannel
from mp_engine.sync.local import LocalChannel
from mp_engine.sync.redact import Redactor

if TYPE_CHECKING:
    from mp_engine.alerts.deliver import Alerter
    from mp_engine.fleet.dispatch import Fleet

log = structlog.get_logger("mp_engine.pipeline.engine")


class Engine:
    def __init__(
        self,
        ws: Workspace,
        config: Config,
        *,
        stop: threading.Event | None = None,
        stop_now: threading.Event | None = None,
        redact: Redactor | None = None,
        git: bool = False,
        fleet: Fleet | None = None,
    ):
        """`git`: talk to the remote `[git]` names (`build` sets it from the configuration);
        otherwise the no-op `LocalChannel`. `fleet`: agent attempts run on workers through
        Temporal (`[fleet]`, docs/FLEET.md)."""
        self.ws = ws
        self.config = config
        self.stop = stop or threading.Event()
        self.stop_now = stop_now or threading.Event()
        self.redact: Callable[[str], str] = redact or (lambda text: text)
        self.events = EventLog(ws.events_file, redact=self.redact)
        self.state = StateStore(ws.state_file, self.events)
        self.inbox = Inbox(ws, config.engine.settle_seconds, max_bytes=config.engine.max_mp_bytes)
        self.sync: Channel = (
            GitChannel(ws, config.git, events=self.events, inbox=self.inbox, redact=redact) if git else LocalChannel()
        )
        self.lock = WorkspaceLock(ws.lock_file, config.engine.lock_timeout, stop=self.stop)
        self.fleet = fleet
        dispatch = fleet.runner if fleet else None
        # `[repos.NAME]` (issue #41): each repository's mirror and forge, built once; a missing
        # token or `[github]` extra stops the engine here with the fix, not a run later.
        self.repos = open_repositories(ws.local_dir, config, secretenv.environ()) if config.repos else {}
        agent = AgentExecutor(dispatch, self.repos)
        self.executors: dict[str, Executor] = {"shell": ShellExecutor(), "agent": agent}
        self.reserve = Reserve(ws.local_dir / "reserve", config.engine.disk_reserve_bytes)
        self.alerts = self._alerter() if config.notify.enabled else None
        self.mode = "daemon"
        self.ctx = EngineContext(
            ws,
            config,
            self.events,
            self.state,
            self.inbox,
            self.sync,
            self.redact,
            self.reserve,
            self.stop,
            self.stop_now,
            advise=agent.advise if config.diagnose.level else None,
        )
        self.reviews = Reviewing(self.ctx, self.repos)  # pull requests waiting for review (issue #41)
        self.issues = Issuing(self.ctx, self.repos)  # issues labelled as work (issue #41)
        self._recovery_scan_done = False
        self._held_notice: tuple[Signature, str] | None = None

    def _alerter(self) -> Alerter:
        """[notify]: alerts from the events, delivered by a thread of their own."""
        from mp_engine.alerts.deliver import Alerter

        alerts = Alerter(
            self.config.notify,
            self.ws.local_dir / "alerts.jsonl",
            str(self.ws.root),
            emit=self.events.emit,
            redact=self.redact,
            environ=secretenv.environ(),
        )
        self.events.listeners.append(alerts.on_event)
        return alerts

    @classmethod
    def build(cls, ws: Workspace, config: Config) -> Engine:
        """An engine with the redactor and the channel `[git]` asks for (docs/GIT.md)."""
        fleet = None
        if config.fleet.enabled:  # temporalio is imported only then
            from mp_engine.fleet import require

            require()
            from mp_engine.fleet.dispatch import Fleet

            fleet = Fleet.of(config)
        return cls(ws, config, redact=Redactor.from_config(config), git=config.git.enabled, fleet=fleet)

    # -- lifecycle -------------------------------------------------------------------

    def start(self, *, daemon: bool = True) -> None:
        """Prepare the workspace and announce the engine (ONLINE, or ERROR if halted).
        With a fleet, Temporal must answer first (FleetUnreachable: exit 2, with the fix);
        with the agent sandbox on, bubblewrap must work (SandboxUnavailable: exit 2)."""
        require_sandbox(self.config.agent)
        if self.fleet is not None:
            self.fleet.connect()
        self.ws.check()
        self.mode = "daemon" if daemon else "once"
        if self.alerts is not None:
            self.alerts.start()
        self.ws.ensure_dirs()
        for d in (self.ws.root, self.ws.system_dir, self.ws.inbox_dir, self.ws.local_dir):
            for path in sweep_temp_files(d):
                self.events.emit("temp_file_removed", path=self.ws.rel(path))
        for path in sweep_incomplete_runs(self.ws):
            self.events.emit("temp_file_removed", path=self.ws.rel(path))
        self.reserve.ensure()
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": now_iso(),
            "mode": "daemon" if daemon else "once",
        }
        try:
            with self.lock.hold("engine start"):
                move_legacy_event_log(self.ws, self.events.emit)
                self.sync.startup()
                state = self.state.read()
                self._own_open_run(state)
                status = state.status if state.run_id else (Status.ERROR if state.halt else Status.ONLINE)
                # Not durable (its content is fsynced, the rename not): after a power loss the
                # engine is down, and the state before it is no less true.
                self.state.update(status=status, daemon=info, reason="engine started", durable=False)
                if daemon:  # the remote says the engine is up from its start, not its first MP
                    self.sync.commit_state(f"mp-engine: engine started ({status})")
        except LockTimeout:
            log.info("another engine holds the workspace; leaving its state as it is")
        self.events.emit(
            "engine_started", pid=os.getpid(), version=__version__, root=str(self.ws.root), mode=info["mode"]
        )

    def _own_open_run(self, state: SessionState) -> None:
        """The MP a crash left running is the engine's, not one waiting in the slot: every
        pull before its run resumes (the start's push, the first poll) must know it, or it
        is queued and runs again once its recovery has finished it (issue #45)."""
        if not state.run_id:
            return
        try:
            ledger = RunArchive(self.ws.runs_dir / state.run_id).ledger().model
        except (OSError, ValueError):
            return  # no archive yet (a claim cut short): the first pass claims it again
        if ledger.status != "closed":
            self.inbox.busy_sha = ledger.mp_sha256

    def shutdown(self) -> None:
        """Clean stop: OFFLINE, or ERROR while halted, so the orchestrator still sees the
        failure (a halt and an unfinished run are kept for the restart)."""
        try:
            with self.lock.hold("engine stop", timeout=min(self.config.engine.lock_timeout, 5.0)):
                state = self.state.read()
                daemon = getattr(state, "daemon", None)
                if daemon and daemon.get("pid") == os.getpid():
                    status = Status.ERROR if state.halt else Status.OFFLINE
                    self.state.update(status=status, daemon=None, reason="engine stopped", durable=False)
                    # The remote learns that the engine is down from its stop: a daemon's
                    # start said it was up; a pass's (`once`) only when it committed a state,
                    # which then says ONLINE (issue #44).
                    once = daemon.get("mode") != "daemon"
                    self.sync.commit_state(f"mp-engine: engine stopped ({status})", if_naming=daemon if once else None)
        except (LockTimeout, MpEngineError, OSError) as e:  # OSError: a full disk, say
            log.warning("could not record OFFLINE", error=str(e))
        self.events.emit("engine_stopped", pid=os.getpid(), mode=self.mode)
        if self.alerts is not None:
            self.alerts.close()
        self.events.sync()
        self.sync.stopping()
        self.sync.close()
        if self.fleet is not None:
            self.fleet.close()

    # -- one pass --------------------------------------------------------------------

    def tick(self) -> TickResult:
        """One full pass; see the module docstring."""
        self.events.tee = None  # set again by whatever run this pass claims or resumes
        if not self.ws.inbox_dir.is_dir():
            self.ws.inbox_dir.mkdir(parents=True, exist_ok=True)
            self.events.emit("inbox_recreated", path=self.ws.rel(self.ws.inbox_dir))
        if self.sync.due():
            try:
                with self.lock.hold("git sync"):
                    polled = self.sync.poll()  # what it integrated, it tells the inbox itself
                    failed = synced.after_sync(self.ctx, polled) if polled.problem is not None else None
            except LockTimeout as e:
                return TickResult(Action.BUSY, detail=str(e))
            if failed is not None:
                return failed
        scan = self.inbox.scan()
        if (
            not scan.ready
            and self._recovery_scan_done
            and not len(self.inbox.queue)
            and self.state.read().run_id is None
            and not cancel_requested(self.ws)
            and not answer_requested(self.ws)
            and not self.reviews.due()
            and not self.issues.due()
        ):
            return TickResult(Action.WAITING if scan.entry else Action.IDLE, wait_until=self._wake(scan.wait_until))
        try:
            with self.lock.hold("tick"):
                finalized = self.ctx.finalized
                result = self._tick_locked()
                if result.sync is not None:  # the sync point the pass ended with
                    problem = synced.after_sync(self.ctx, result.sync) if result.sync.problem is not None else None
                    result = problem or replace(result, sync=None)
                if self.ctx.finalized != finalized:  # a run ended: retention may prune
                    result = synced.prune_runs(self.ctx) or result
        except LockTimeout as e:
            return TickResult(Action.BUSY, detail=str(e))
        if result.action in (Action.COMPLETED, Action.ERROR):
            self.reserve.ensure()  # refilled once a full disk has room again
        return result

    def _tick_locked(self) -> TickResult:
        got = pending_answer(self.ws)  # an answer to the MP the engine is halted on (answering.py)
        state = self.state.read()
        if got is not None and answering.take_file(self.ctx, state, got):
            return self._resume(RunArchive(self.ws.runs_dir / str(self.state.read().run_id)))
        waiting = state.waiting
        # A cancel request ends a wait at once: the run resumes, and its watch fires.
        if (
            state.run_id
            and waiting
            and (left := seconds_until(waiting.get("resume_at"))) > 0
            and not cancel_requested(self.ws)
        ):
            # An agent run waits out a rate or usage limit (docs/AGENT.md); it stays open.
            return TickResult(
                Action.WAITING,
                mp_id=state.current,
                run_id=state.run_id,
                wait_until=time.monotonic() + left,
                detail=f"{waiting.get('kind')}: resumes at {waiting.get('resume_at')}",
            )
        for run in self._open_runs(state):
            if run.ledger_path.exists() and run.ledger().model.status != "closed":
                return self._resume(run)
        if state.run_id:  # points at a closed or missing run: nothing left to do for it
            state = self.state.update(run_id=None, reason="stale run pointer cleared")
        if state.halt is None and self.reviews.due() and (reviewed := self.reviews.look()) is not None:
            return self._resume(reviewed)  # a reviewer steered a pull request: its run goes on now
        if cancel_requested(self.ws) and (failed := synced.after_sync(self.ctx, settle_cancels(self.ctx))):
            return failed
        if state.halt is None and self.issues.due() and not len(self.inbox.queue) and not self.ws.inbox_file.exists():
            self.issues.look()  # nothing else waits: the oldest waiting issue, queued as an MP (issuing.py)
        return self._take_from_inbox(state)

    def _open_runs(self, state: SessionState) -> list[RunArchive]:
        """Every open run on the first pass (after a crash); later only the current one."""
        if self._recovery_scan_done:
            return [RunArchive(self.ws.runs_dir / state.run_id)] if state.run_id else []
        for path in sweep_unfilled_runs(self.ws):
            self.events.emit("run_unfilled_removed", path=self.ws.rel(path))
        self._recovery_scan_done = True
        return open_runs(self.ws)

    def _take_from_inbox(self, state: SessionState) -> TickResult:
        if len(self.inbox.queue) and (taken := take_queued(self.ctx, state, self.executors)) is not None:
            return taken
        scan = self.inbox.scan()
        if not scan.ready or scan.entry is None:
            return TickResult(Action.WAITING if scan.entry else Action.IDLE, wait_until=self._wake(scan.wait_until))
        entry = scan.entry
        data: bytes | None = None
        parsed: MicroProject | InvalidMPError
        try:
            data = self.inbox.read(entry, self.config.engine.max_mp_bytes)
            if data is None:
                return TickResult(Action.WAITING, detail="the inbox file changed while being read")
            parsed = parse(data, max_bytes=self.config.engine.max_mp_bytes)
        except InvalidMPError as e:  # not a regular file, over the size cap, or not an MP
            parsed = e
        cancels = pending_cancels(self.ws)[0] if cancel_requested(self.ws) else []
        verdict = admit(self.ctx, state, data, parsed, self.executors, cancels=cancels)
        if isinstance(verdict, Refused):
            return finalize(self.ctx, *reject(self.ctx, entry, data, verdict.error))
        if isinstance(verdict, Held):
            if verdict.mp is not None:
                assert data is not None  # the MP held was parsed from it
                self.inbox.queue.add(data, SEEN)  # replaced while held, it still gets a result
            return self._hold(state, entry, verdict.why)
        if isinstance(verdict, Ended):
            return verdict.result
        assert data is not None  # the MP admitted was parsed from it
        run, ledger = claim(self.ctx, verdict.mp, data, verdict.executor.name)
        return drive(self.ctx, run, ledger, verdict.mp, verdict.executor)

    def _wake(self, inbox: float | None) -> float | None:
        """When a pass is next due: the inbox's time, or the next look at the forge."""
        times = [t for t in (inbox, self.reviews.wait_until(), self.issues.wait_until()) if t is not None]
        return min(times) if times else None

    def _hold(self, state: SessionState, entry: Entry, why: str) -> TickResult:
        """Leave a pending MP untouched while halted; say so once per inbox version."""
        assert state.halt is not None
        notice = (entry.sig, state.halt.mp_id)
        if notice != self._held_notice:
            self._held_notice = notice
            self.events.emit("mp_held", halted_on=state.halt.mp_id, reason=why)
        return TickResult(Action.HALTED, mp_id=state.halt.mp_id, detail=why)

    def _resume(self, run: RunArchive) -> TickResult:
        """Finish or resume a run that a crash or a stop left open (FR-EVT-WF-RECOVERY)."""
        ledger = run.ledger()
        self.events.tee = run.dir / EVENTS_FILE
        if ledger.model.status == "finishing":
            self.events.emit(
                "recovery",
                run=run.run_id,
                mp=ledger.model.mp_id,
                resume_point="finalize",
                steps_recovered=[],
                steps_to_retry=[],
                reason="outcome recorded, result not yet published",
            )
            return finalize(self.ctx, run, ledger)
        polled = bool((self.state.read().waiting or {}).get("polled"))  # back from a look at CI: no crash
        mp = reopen(self.ctx, run, quiet=polled)
        try:
            if isinstance(mp, Exception):
                raise mp
            executor = executor_for(mp, self.executors, self.config.execution.executor)
        except (OSError, InvalidMPError) as e:
            _, failed = error_run(
                self.ws, self.events, mp_id=ledger.model.mp_id, diagnosis=diag.engine_error(e), into=run
            )
            return finalize(self.ctx, run, failed)
        cleared: dict[str, Any] = {"waiting": None} if self.state.read().waiting else {}
        self.inbox.run_started(mp.sha256, from_slot=run.ledger().model.source is None)
        self.state.update(
            current=mp.mp_id, status=Status.RUNNING, run_id=run.run_id, reason="resuming after restart", **cleared
        )
        return drive(self.ctx, run, run.ledger(), mp, executor)

    # -- approval --------------------------------------------------------------------

    def approve(self, via: str = "cli") -> str | None:
        """Lift a halt; return the MP id it was on, or None if the engine was not halted."""
        with self.lock.hold("approve"):
            state = self.state.read()
            if state.halt is None:
                return None
            daemon = getattr(state, "daemon", None)
            alive = (
                isinstance(daemon, dict) and daemon.get("host") == socket.gethostname() and pid_alive(daemon.get("pid"))
            )
            self.state.update(
                halt=None, current=IDLE, status=Status.ONLINE if alive else Status.OFFLINE, reason=f"approved via {via}"
            )
            self.events.emit("approved", via=via, approved=state.halt.mp_id)
            # The orchestrator reads the state on the remote: the lifted halt travels too.
            self.sync.commit_state(f"{state.halt.mp_id}: halt approved on the engine host")
            return state.halt.mp_id
