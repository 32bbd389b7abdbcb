"""The engine: one MP-1.3 pass in `tick()`, and the daemon loop around it in `run()`.

A tick, under the workspace lock:
  1. finish or resume any run a crash or a stop left open (the ledger says where);
  2. otherwise, if the inbox holds a complete MP: read and parse it (never run half an MP),
     respect a halt, copy it into a new run archive, set RUNNING, execute, validate;
  3. record the outcome in the ledger, write the result, set the state, clear the inbox.
Step 3 is idempotent, so a crash anywhere in it is finished on the next tick.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from mp_engine import __version__
from mp_engine import diagnosis as diag
from mp_engine.archive import (
    RunArchive,
    create_run,
    fill_run,
    open_runs,
    reserve_run,
    sweep_incomplete_runs,
    sweep_unfilled_runs,
)
from mp_engine.atomic import atomic_write, sweep_temp_files
from mp_engine.clock import now_iso, parse_iso
from mp_engine.config import Config
from mp_engine.errors import InvalidMPError, LockTimeout, MpEngineError
from mp_engine.events import EventLog
from mp_engine.executors import ExecResult, Executor, ShellExecutor
from mp_engine.executors.agent import AgentExecutor
from mp_engine.gitsync import GitSync, SyncOutcome
from mp_engine.inbox import CLAIMED_PREFIX, Entry, EntryKind, Inbox
from mp_engine.ledger import Ledger, read_artifact
from mp_engine.lock import WorkspaceLock
from mp_engine.mpfile import MicroProject, parse, parse_header_line, sha256_hex
from mp_engine.process import kill_marked_groups, kill_stale_group, pid_alive
from mp_engine.result import COMPLETED, ERROR, Outcome, write_result
from mp_engine.state import IDLE, Halt, SessionState, StateStore, Status
from mp_engine.steps import Budget, StepContext
from mp_engine.workspace import EVENTS_FILE, Workspace

if TYPE_CHECKING:
    from mp_engine.supervisor import Supervisor

log = structlog.get_logger("mp_engine.engine")


@dataclass(frozen=True)
class TickResult:
    """What one pass did. `action` is one of: idle, waiting, completed, error, halted,
    busy, interrupted."""

    action: str
    mp_id: str | None = None
    run_id: str | None = None
    wait_until: float | None = None  # monotonic time worth waking up at
    detail: str | None = None


class Engine:
    def __init__(
        self,
        ws: Workspace,
        config: Config,
        *,
        stop: threading.Event | None = None,
        stop_now: threading.Event | None = None,
        redact: Callable[[str], str] | None = None,
        sync: GitSync | None = None,
    ):
        self.ws = ws
        self.config = config
        self.stop = stop or threading.Event()
        self.stop_now = stop_now or threading.Event()
        self.wake = threading.Event()
        self.redact = redact or (lambda text: text)
        self.events = EventLog(ws.events_file, redact=self.redact)
        self.sync = sync  # the git channel (gitsync.py), None when [git] is off
        if sync is not None:
            sync.bind(self.events)
        self.state = StateStore(ws.state_file, self.events)
        self.inbox = Inbox(ws, config.engine.settle_seconds)
        self.lock = WorkspaceLock(ws.lock_file, config.engine.lock_timeout, stop=self.stop)
        self.executors: dict[str, Executor] = {"shell": ShellExecutor(), "agent": AgentExecutor()}
        self._recovery_scan_done = False
        self._held_notice: tuple | None = None
        # The service supervisor (supervisor.py): notify, watchdog and stall limit. Set by
        # `Supervisor.install()` for the daemon; None for `once`, tests and embedders.
        self.supervisor: Supervisor | None = None

    # -- lifecycle -------------------------------------------------------------------

    def _move_legacy_event_log(self) -> None:
        """Versions before 0.2 kept the event log at SYSTEM/events.jsonl (and committed it):
        move it to SYSTEM/.engine/, where git never touches it."""
        old, new = self.ws.legacy_events_file, self.ws.events_file
        if not old.is_file() or old.is_symlink():
            return
        if new.exists():  # something wrote the new log first (`init`, a CLI): old lines go first
            atomic_write(new, old.read_bytes() + new.read_bytes())
            old.unlink()
        else:
            new.parent.mkdir(parents=True, exist_ok=True)
            os.rename(old, new)
        self.events.emit("event_log_moved", path=self.ws.rel(new), was=self.ws.rel(old))

    def start(self, *, daemon: bool = True) -> None:
        """Prepare the workspace and announce the engine (ONLINE, or ERROR if halted)."""
        self.ws.check()
        self.ws.ensure_dirs()
        for d in (self.ws.root, self.ws.system_dir, self.ws.inbox_dir, self.ws.local_dir):
            for path in sweep_temp_files(d):
                self.events.emit("temp_file_removed", path=self.ws.rel(path))
        for path in sweep_incomplete_runs(self.ws):
            self.events.emit("temp_file_removed", path=self.ws.rel(path))
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": now_iso(),
            "mode": "daemon" if daemon else "once",
        }
        try:
            with self.lock.hold("engine start"):
                self._move_legacy_event_log()
                if self.sync is not None:
                    self.sync.startup()
                state = self.state.read()
                status = state.status if state.run_id else (Status.ERROR if state.halt else Status.ONLINE)
                self.state.update(status=status, daemon=info, reason="engine started")
        except LockTimeout:
            log.info("another engine holds the workspace; leaving its state as it is")
        self.events.emit(
            "engine_started", pid=os.getpid(), version=__version__, root=str(self.ws.root), mode=info["mode"]
        )

    def shutdown(self) -> None:
        """Clean stop: OFFLINE, or ERROR while halted, so the orchestrator still sees the
        failure (a halt and an unfinished run are kept for the restart)."""
        try:
            with self.lock.hold("engine stop", timeout=min(self.config.engine.lock_timeout, 5.0)):
                state = self.state.read()
                daemon = getattr(state, "daemon", None)
                if daemon and daemon.get("pid") == os.getpid():
                    status = Status.ERROR if state.halt else Status.OFFLINE
                    self.state.update(status=status, daemon=None, reason="engine stopped")
        except (LockTimeout, MpEngineError) as e:
            log.warning("could not record OFFLINE", error=str(e))
        self.events.emit("engine_stopped", pid=os.getpid())
        self.events.sync()
        if self.sync is not None:
            self.sync.close()

    # -- one pass --------------------------------------------------------------------

    def tick(self) -> TickResult:
        """One full pass; see the module docstring."""
        self.events.tee = None  # set again by whatever run this pass claims or resumes
        if not self.ws.inbox_dir.is_dir():
            self.ws.inbox_dir.mkdir(parents=True, exist_ok=True)
            self.events.emit("inbox_recreated", path=self.ws.rel(self.ws.inbox_dir))
        if self.sync is not None and self.sync.due():
            try:
                with self.lock.hold("git sync"):
                    failed = self._after_sync(self.sync.poll())
            except LockTimeout as e:
                return TickResult("busy", detail=str(e))
            if failed is not None:
                return failed
        scan = self.inbox.scan()
        if not scan.ready and self._recovery_scan_done and self.state.read().run_id is None:
            return TickResult("waiting" if scan.entry else "idle", wait_until=scan.wait_until)
        try:
            with self.lock.hold("tick"):
                result = self._tick_locked()
        except LockTimeout as e:
            return TickResult("busy", detail=str(e))
        if result.action in ("completed", "error"):
            _trim_heap()
        return result

    def _tick_locked(self) -> TickResult:
        state = self.state.read()
        waiting = state.waiting
        if state.run_id and waiting and (left := _seconds_until(waiting.get("resume_at"))) > 0:
            # An agent run waits out a rate or usage limit (docs/AGENT.md); it stays open.
            return TickResult(
                "waiting",
                mp_id=state.current,
                run_id=state.run_id,
                wait_until=time.monotonic() + left,
                detail=f"{waiting.get('kind')}: resumes at {waiting.get('resume_at')}",
            )
        if not self._recovery_scan_done:
            for path in sweep_unfilled_runs(self.ws):
                self.events.emit("run_unfilled_removed", path=self.ws.rel(path))
            runs = open_runs(self.ws)
            self._recovery_scan_done = True
        else:
            runs = [RunArchive(self.ws.runs_dir / state.run_id)] if state.run_id else []
        for run in runs:
            if run.ledger_path.exists() and run.ledger().model.status != "closed":
                return self._resume(run)
        if state.run_id:  # points at a closed or missing run: nothing left to do for it
            state = self.state.update(run_id=None, reason="stale run pointer cleared")

        scan = self.inbox.scan()
        if not scan.ready or scan.entry is None:
            return TickResult("waiting" if scan.entry else "idle", wait_until=scan.wait_until)
        entry = scan.entry
        data: bytes | None = None
        try:
            data = self.inbox.read(entry, self.config.engine.max_mp_bytes)
            if data is None:
                return TickResult("waiting", detail="the inbox file changed while being read")
            refusal = self.sync.refusal_for(data) if self.sync is not None else None
            if refusal is not None:  # a signature verdict: refused whatever the halt says
                return self._reject(entry, data, refusal)
            mp = parse(data, max_bytes=self.config.engine.max_mp_bytes)
            executor = self._executor_for(mp)
            executor.validate(mp)
        except InvalidMPError as e:
            if state.halt:
                return self._hold(state, entry, f"invalid MP ({e.reason})")
            return self._reject(entry, data, e)
        if state.halt:
            if mp.approves and mp.approves in (state.halt.mp_id, state.halt.run_id):
                self.state.update(halt=None, reason=f"approved by {mp.mp_id}")
                self.events.emit("approved", via="mp", approved=state.halt.mp_id, by=mp.mp_id)
            else:
                why = f"its `Approves:` names {mp.approves}" if mp.approves else "it has no `Approves:` header"
                return self._hold(state, entry, f"{mp.mp_id} waits: {why}")
        return self._start_run(mp, data, executor)

    def _executor_for(self, mp: MicroProject) -> Executor:
        name = mp.executor or self.config.execution.executor
        executor = self.executors.get(name)
        if executor is None:
            raise InvalidMPError(
                f"`Executor: {name}` is not available in this engine",
                f"Remove the `Executor: {name}` header to use the shell executor.",
                mp_id=mp.mp_id,
            )
        return executor

    def _hold(self, state: SessionState, entry: Entry, why: str) -> TickResult:
        """Leave a pending MP untouched while halted; say so once per inbox version."""
        assert state.halt is not None
        notice = (entry.sig, state.halt.mp_id)
        if notice != self._held_notice:
            self._held_notice = notice
            self.events.emit("mp_held", halted_on=state.halt.mp_id, reason=why)
        return TickResult("halted", mp_id=state.halt.mp_id, detail=why)

    # -- runs ------------------------------------------------------------------------

    def _start_run(self, mp: MicroProject, data: bytes, executor: Executor) -> TickResult:
        # The run id is reserved (one mkdir) and RUNNING published first; the archive copy
        # and the ledger are written next and fsynced before the first side effect. Drop ->
        # RUNNING then costs one directory and one durable write. After a crash in between,
        # recovery finds no readable ledger, clears the run pointer, removes the unfilled
        # run and claims the MP again from the inbox.
        run = reserve_run(self.ws, mp.mp_id)
        self.events.tee = run.dir / EVENTS_FILE
        self.state.update(current=mp.mp_id, status=Status.RUNNING, run_id=run.run_id, reason="MP claimed")
        ledger = fill_run(run, mp_id=mp.mp_id, data=data, mp_sha256=mp.sha256, executor=executor.name)
        run.make_durable()
        self.events.emit("mp_claimed", mp=mp.mp_id, run=run.run_id, sha256=mp.sha256, title=mp.title)
        self.inbox.forget()
        if self.sync is not None:
            self.sync.running(mp.mp_id, run.run_id)
        return self._drive(run, ledger, mp, executor)

    def _budget(self, mp: MicroProject, run: RunArchive, ledger: Ledger) -> Budget:
        if "Timeout" in mp.headers:
            total, source = float(mp.headers["Timeout"]), "Timeout"
        else:
            total, source = self.config.execution.mp_timeout, "mp_timeout"
        used = sum((read_artifact(run.steps_dir, s) or {}).get("duration") or 0.0 for s in ledger.model.steps)
        return Budget(total, source, used)

    def _drive(self, run: RunArchive, ledger: Ledger, mp: MicroProject, executor: Executor) -> TickResult:
        ctx = StepContext(
            ws=self.ws,
            config=self.config,
            run=run,
            ledger=ledger,
            mp=mp,
            events=self.events,
            stop=self.stop,
            stop_now=self.stop_now,
            budget=self._budget(mp, run, ledger),
        )
        try:
            res = executor.run(ctx)
        except Exception as e:  # a bug must still end in a result, not a dead daemon
            log.exception("executor crashed", mp=mp.mp_id)
            res = ExecResult(status="failed", diagnosis=diag.engine_error(e))
        if res.status == "waiting":
            waiting = res.extra["waiting"]
            self.state.update(waiting=waiting, reason=f"waiting: {waiting['kind']} until {waiting['resume_at']}")
            self.events.emit("mp_waiting", mp=mp.mp_id, run=run.run_id, **waiting)
            return TickResult(
                "waiting",
                mp_id=mp.mp_id,
                run_id=run.run_id,
                wait_until=time.monotonic() + max(0.0, _seconds_until(waiting["resume_at"])),
                detail=f"{waiting['kind']}: resumes at {waiting['resume_at']}",
            )
        if res.status == "interrupted":
            self.events.emit(
                "mp_checkpointed",
                mp=mp.mp_id,
                run=run.run_id,
                resume_point=next((s.step_id for s in ledger.model.steps if s.status.value != "completed"), None),
            )
            return TickResult("interrupted", mp_id=mp.mp_id, run_id=run.run_id)
        outcome = Outcome(
            status=COMPLETED if res.status == "completed" else ERROR,
            mp_id=mp.mp_id,
            title=mp.title,
            run_id=run.run_id,
            mp_sha256=mp.sha256,
            started_at=ledger.model.created_at,
            finished_at=now_iso(),
            executor=executor.name,
            steps=res.steps,
            checks=res.checks,
            diagnosis=res.diagnosis,
            error_output=res.error_output,
            error_output_ref=res.error_output_ref,
            notes=list(mp.notes),
            extra=res.extra,
        )
        outcome.duration = (parse_iso(outcome.finished_at) - parse_iso(outcome.started_at)).total_seconds()
        if outcome.status == ERROR:
            outcome.halt_token = mp.mp_id
        ledger.set_outcome(outcome.to_dict())
        return self._finalize(run, ledger)

    def _reject(self, entry: Entry, data: bytes | None, err: InvalidMPError) -> TickResult:
        """An inbox entry that is not a runnable MP: ERROR result, entry archived, halt."""
        mp_id = err.mp_id
        if mp_id is None and data is not None:
            try:
                mp_id = parse_header_line(data.decode("utf-8", errors="replace").split("\n"))[1]
            except InvalidMPError:
                mp_id = None
        sha = (
            sha256_hex(data) if data is not None else (_sha_of_path(entry.path) if entry.kind is EntryKind.FILE else "")
        )
        run, ledger = create_run(self.ws, mp_id=mp_id, data=data, mp_sha256=sha, executor="none")
        self.events.tee = run.dir / EVENTS_FILE
        now = now_iso()
        outcome = Outcome(
            status=ERROR,
            mp_id=mp_id or "UNPARSED",
            title="",
            run_id=run.run_id,
            mp_sha256=sha,
            started_at=now,
            finished_at=now,
            executor="none",
            diagnosis=diag.invalid_mp(err.reason, err.fix, err.line),
            halt_token=mp_id or run.run_id,
        )
        if data is None:
            outcome.notes.append(f"The inbox entry was moved to {self.ws.rel(run.moved_entry)}.")
        ledger.model.inbox_entry = "archive" if data is None else "delete"
        self.events.emit("mp_rejected", mp=mp_id, run=run.run_id, reason=err.reason, kind=entry.kind.value)
        ledger.set_outcome(outcome.to_dict())
        return self._finalize(run, ledger)

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
            return self._finalize(run, ledger)
        rec = ledger.recover(run.steps_dir, reason="engine restarted with this run unfinished")
        killed = [pid for pgid, started in rec.stale_groups for pid in kill_stale_group(pgid, started)]
        for step_id in rec.unrecorded:  # spawned, but the engine died before recording the group
            killed += kill_marked_groups([f"MP_RUN_DIR={run.dir}", f"MP_STEP={step_id}"])
        self.events.emit(
            "recovery",
            run=run.run_id,
            mp=ledger.model.mp_id,
            resume_point=rec.resume_point,
            steps_recovered=rec.steps_recovered,
            steps_to_retry=rec.steps_to_retry,
            killed_pids=killed or None,
            policy=self.config.recovery.interrupted_step,
        )
        try:
            data = run.mp_copy.read_bytes()
            mp = parse(data, max_bytes=max(self.config.engine.max_mp_bytes, len(data)))
            executor = self._executor_for(mp)
        except (OSError, InvalidMPError) as e:
            now = now_iso()
            outcome = Outcome(
                status=ERROR,
                mp_id=ledger.model.mp_id,
                title="",
                run_id=run.run_id,
                mp_sha256=ledger.model.mp_sha256,
                started_at=ledger.model.created_at,
                finished_at=now,
                diagnosis=diag.engine_error(e),
                halt_token=ledger.model.mp_id,
            )
            ledger.set_outcome(outcome.to_dict())
            return self._finalize(run, ledger)
        cleared = {"waiting": None} if self.state.read().waiting else {}
        self.state.update(
            current=mp.mp_id, status=Status.RUNNING, run_id=run.run_id, reason="resuming after restart", **cleared
        )
        return self._drive(run, ledger, mp, executor)

    def _finalize(self, run: RunArchive, ledger: Ledger) -> TickResult:
        """Publish a recorded outcome: result, inbox cleared, state, ledger closed. Idempotent."""
        assert ledger.model.outcome is not None
        outcome = Outcome.from_dict(ledger.model.outcome)
        write_result(self.ws, run, outcome, redact=self.redact)
        last_result = {
            "mp_id": outcome.mp_id,
            "status": outcome.status,
            "run_id": run.run_id,
            "finished_at": outcome.finished_at,
        }
        self._clear_inbox(run, ledger)  # before the state says done: an orchestrator may then drop the next MP
        if outcome.status == COMPLETED:
            self.state.update(
                last_completed=outcome.mp_id,
                current=IDLE,
                status=Status.ONLINE,
                run_id=None,
                last_result=last_result,
                reason=outcome.commit_summary,
            )
        else:
            assert outcome.diagnosis is not None
            halt = Halt(
                mp_id=outcome.halt_token or outcome.mp_id,
                run_id=run.run_id,
                reason=outcome.diagnosis.summary,
                since=now_iso(),
            )
            self.state.update(
                current=outcome.mp_id,
                status=Status.ERROR,
                run_id=None,
                halt=halt,
                last_result=last_result,
                reason=outcome.commit_summary,
            )
        ledger.close()
        if outcome.status == COMPLETED:
            self.events.emit("mp_completed", mp=outcome.mp_id, run=run.run_id, duration=outcome.duration)
            self.events.sync()  # the MP's events are durable with its result (one fsync)
            self.events.tee = None  # the run's own copy is complete: it travels with the commit
            if self.sync is not None and (
                failed := self._after_sync(self.sync.publish(outcome.commit_summary, run.run_id))
            ):
                return failed
            return TickResult("completed", mp_id=outcome.mp_id, run_id=run.run_id)
        assert outcome.diagnosis is not None
        self.events.emit(
            "mp_failed",
            mp=outcome.mp_id,
            run=run.run_id,
            kind=outcome.diagnosis.kind,
            summary=outcome.diagnosis.summary,
            fix=outcome.diagnosis.fix,
        )
        self.events.emit("halted", mp=outcome.mp_id, approve_with=f"Approves: {outcome.halt_token}")
        self.events.sync()
        self.events.tee = None
        if self.sync is not None and (
            failed := self._after_sync(self.sync.publish(outcome.commit_summary, run.run_id))
        ):
            return failed
        return TickResult("error", mp_id=outcome.mp_id, run_id=run.run_id, detail=outcome.diagnosis.summary)

    def _clear_inbox(self, run: RunArchive, ledger: Ledger) -> None:
        """Take this run's MP out of the inbox, leaving any newer MP that replaced it.

        The entry is first renamed aside (inside the inbox, so watchers see a paired move,
        not a lone IN_MOVED_FROM that watchdog holds back for 0.5 s) and only then compared,
        so a newer MP renamed in between a check and a delete is never the one deleted.
        Idempotent: a crash at any point is finished by the next `_finalize`.
        """
        if ledger.model.inbox_entry == "untouched" or os.path.lexists(run.moved_entry):
            return
        aside = self.ws.inbox_dir / f"{CLAIMED_PREFIX}{run.run_id}"
        if not os.path.lexists(aside):
            if self.inbox.lstat_entry() is None:
                return
            try:
                os.rename(self.ws.inbox_file, aside)
            except FileNotFoundError:
                return
        regular = os.path.isfile(aside) and not os.path.islink(aside)
        archive = ledger.model.inbox_entry == "archive"
        # Ours: the bad entry this run was about (archive), or a file with the bytes we ran.
        if (archive and not regular) or (regular and _sha_of_path(aside) == ledger.model.mp_sha256):
            self.inbox.forget()
            if archive:
                os.rename(aside, run.moved_entry)
            else:
                os.unlink(aside)  # the MP itself is archived as mp.txt
            return
        # A different MP arrived during the run: put it back, never over an even newer one.
        try:
            if regular:
                os.link(aside, self.ws.inbox_file, follow_symlinks=False)  # fails if the slot is taken
            elif os.path.lexists(self.ws.inbox_file):  # a directory or link cannot be hard-linked
                raise FileExistsError(self.ws.inbox_file)
            else:
                os.rename(aside, self.ws.inbox_file)
        except FileExistsError:
            os.rename(aside, run.moved_entry)
            self.events.emit(
                "inbox_superseded",
                run=run.run_id,
                kept=self.ws.rel(run.moved_entry),
                detail="two newer MPs arrived during the run; the newest is in the inbox, the other is kept here",
            )
            return
        if os.path.lexists(aside):
            os.unlink(aside)
        self.events.emit(
            "inbox_replaced", run=run.run_id, detail="a different MP arrived during the run; it stays in the inbox"
        )

    def _after_sync(self, out: SyncOutcome) -> TickResult | None:
        """Act on a sync point: pulled files are complete; a sync problem is an ERROR result."""
        if out.integrated:
            self.inbox.note_complete()  # git wrote the inbox file whole, under our lock
        if out.problem is None:
            return None
        now = now_iso()
        mp_id = out.problem_mp or (self.state.read().last_result or {}).get("mp_id")
        run, ledger = create_run(self.ws, mp_id=mp_id, data=None, mp_sha256="", executor="none")
        self.events.tee = run.dir / EVENTS_FILE
        outcome = Outcome(
            status=ERROR,
            mp_id=mp_id or "UNPARSED",
            title="",
            run_id=run.run_id,
            mp_sha256="",
            started_at=now,
            finished_at=now,
            executor="none",
            diagnosis=out.problem,
            halt_token=mp_id or run.run_id,
        )
        self.events.emit("sync_blocked", run=run.run_id, kind=out.problem.kind, summary=out.problem.summary)
        ledger.model.inbox_entry = "untouched"
        ledger.set_outcome(outcome.to_dict())
        return self._finalize(run, ledger)

    # -- approval --------------------------------------------------------------------

    def approve(self, via: str = "cli") -> str | None:
        """Lift a halt; return the MP id it was on, or None if the engine was not halted."""
        with self.lock.hold("approve"):
            state = self.state.read()
            if state.halt is None:
                return None
            daemon = getattr(state, "daemon", None)
            alive = bool(daemon) and daemon.get("host") == socket.gethostname() and pid_alive(daemon.get("pid"))
            self.state.update(
                halt=None, current=IDLE, status=Status.ONLINE if alive else Status.OFFLINE, reason=f"approved via {via}"
            )
            self.events.emit("approved", via=via, approved=state.halt.mp_id)
            return state.halt.mp_id

    # -- the daemon loop -------------------------------------------------------------

    def run(self, watcher_factory: Callable[[Engine], object] | None = None) -> None:
        """Run until `stop` is set: tick, then sleep until an event, a timer or a stop."""
        from mp_engine.watchers import make_watcher

        self.start(daemon=True)
        watcher = (watcher_factory or make_watcher)(self)
        watcher.start()
        sup = self.supervisor
        if sup is not None:
            sup.loop_started(watcher)
        cfg = self.config
        next_health = time.monotonic() + cfg.watch.health_interval
        try:
            while not self.stop.is_set():
                self.wake.clear()
                result = self.safe_tick()
                if sup is not None:  # READY, STATUS, WATCHDOG: only a pass that ended proves liveness
                    sup.after_tick(result)
                if self.stop.is_set():
                    break
                now = time.monotonic()
                if now >= next_health:
                    watcher.ensure_healthy()
                    next_health = now + cfg.watch.health_interval
                timeout = min(cfg.engine.poll_interval, max(0.0, next_health - now))
                if result.wait_until is not None:
                    timeout = min(timeout, max(0.0, result.wait_until - now))
                if self.sync is not None:  # the git poll has its own timer ([git] poll_interval)
                    timeout = min(timeout, max(0.0, self.sync.next_poll_at() - now))
                if result.action == "busy":
                    timeout = max(timeout, 0.5)
                if sup is not None:  # wake in time for the next watchdog ping
                    timeout = min(timeout, sup.max_wait())
                self.wake.wait(timeout)
        finally:
            if sup is not None:
                sup.stopping()
            watcher.stop()
            self.shutdown()

    def safe_tick(self) -> TickResult:
        """`tick()`, but an unexpected failure is logged and the daemon lives on."""
        try:
            return self.tick()
        except MpEngineError as e:
            self.events.emit("tick_failed", error=str(e))
            return TickResult("failed", detail=str(e), wait_until=time.monotonic() + self.config.engine.poll_interval)
        except Exception as e:
            log.exception("tick crashed")
            self.events.emit("tick_failed", error=f"{type(e).__name__}: {e}")
            return TickResult("failed", detail=str(e), wait_until=time.monotonic() + self.config.engine.poll_interval)


_LAST_TRIM = [0.0]


def _trim_heap(min_interval: float = 5.0) -> None:
    """Give freed heap memory back to the OS (glibc `malloc_trim`), at most every
    `min_interval` seconds: glibc otherwise keeps freed memory mapped, and a daemon that
    runs for weeks keeps its high-water mark (bench/RESULTS.md, figure 5)."""
    now = time.monotonic()
    if now - _LAST_TRIM[0] < min_interval:
        return
    _LAST_TRIM[0] = now
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to do
        pass


def _seconds_until(iso: str | None) -> float:
    """Seconds from now until the ISO timestamp `iso` (0 if absent or past)."""
    if not iso:
        return 0.0
    return max(0.0, (parse_iso(iso) - parse_iso(now_iso())).total_seconds())


def _sha_of_path(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a regular file's bytes (streamed); "" if it cannot be read."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return ""
    return h.hexdigest()
