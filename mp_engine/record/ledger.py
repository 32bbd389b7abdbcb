"""The run ledger: one per MP run, the record that makes a crash resumable.

Follows the RunLedger of the Micro-Task Executor spec: an ordered list of steps, each with
a status and an idempotency key, persisted atomically after every change. A step's output
artifact (`<step>.exit.json`, written atomically when the step ends) carries the same key,
so after a crash `recover()` can tell a step that finished from one that was cut off.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from mp_engine.core.atomic import atomic_write, atomic_write_json, fsync_dir, fsync_file
from mp_engine.core.clock import now_iso
from mp_engine.record import journal

JOURNAL_MIN_BYTES = 64 * 1024  # below this a journal is never compacted
T = TypeVar("T")


class StepStatus(StrEnum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"


class LedgerStep(BaseModel):
    model_config = ConfigDict(extra="allow")

    step_id: str
    kind: str
    idempotency_key: str
    status: StepStatus = StepStatus.PENDING
    attempts: int = 0
    started_at: str | None = None
    completed_at: str | None = None
    output_ref: str | None = None
    error: str | None = None
    recoverable: bool = True
    interrupted: bool = False  # was cut off by a crash or a forced stop at least once
    pgid: int | None = None
    proc_start: float | None = None  # the leader's creation time (pids.Proc.started)


class RunLedger(BaseModel):
    model_config = ConfigDict(extra="allow")

    schema_version: int = 1
    ledger_id: str
    run_id: str
    mp_id: str
    mp_sha256: str
    executor: str = "shell"
    created_at: str
    status: Literal["open", "finishing", "closed"] = "open"
    outcome: dict[str, Any] | None = None
    # What finalizing does with the inbox entry this run came from: delete it (it is
    # archived as mp.txt), move it into the run directory (bad input we could not read),
    # or leave the inbox alone (the run did not come from the inbox, e.g. a sync problem).
    inbox_entry: Literal["delete", "archive", "untouched"] = "delete"
    # Where the MP came from when not from the slot: `queue:<id>` (inbox/queue.py). A
    # queued version is taken out of the queue after its run exists; this field tells a
    # restart that the entry it finds still queued already has its run.
    source: str | None = None
    steps: list[LedgerStep] = []
    resume_point: str | None = None
    resume_reason: str | None = None
    recoveries: list[dict[str, Any]] = []
    journal_gen: int = 0  # the generation of ledger.journal's lines that apply (journal.py)


def _locked(method: Callable[..., T]) -> Callable[..., T]:
    """Run a Ledger method under its lock."""

    @functools.wraps(method)
    def wrapper(self: Ledger, *args: Any, **kwargs: Any) -> T:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


def idempotency_key(*parts: str) -> str:
    """SHA-256 over the parts, NUL-separated."""
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


@dataclass
class Recovery:
    """What `Ledger.recover` found: the spec's FR-EVT-WF-RECOVERY payload."""

    resume_point: str | None
    steps_recovered: list[str] = field(default_factory=list)
    steps_to_retry: list[str] = field(default_factory=list)
    stale_groups: list[tuple[int, float | None]] = field(default_factory=list)
    unrecorded: list[str] = field(default_factory=list)  # in progress, group not yet recorded


class Ledger:
    """A `RunLedger` bound to its file; every mutation is persisted before returning."""

    def __init__(self, path: Path, model: RunLedger):
        self.path = Path(path)
        self.model = model
        # Batch mode, for an executor that checkpoints each unit of work itself (the agent
        # loop, docs/AGENT.md): `durable = False` skips fsync (saves survive kill -9, not a
        # power loss) and `deferred = True` keeps step transitions in memory (`_dirty`)
        # until a process is spawned (recovery must be able to kill its group) or the
        # executor calls `flush(durable=True)` when a unit is done: journal lines, never a
        # rewrite of the whole ledger, so an iteration's bookkeeping does not grow with the run.
        self.durable = True
        self.deferred = False
        self._dirty: dict[str, LedgerStep] = {}
        self._index = {s.step_id: s for s in model.steps}
        self._ledger_bytes = 0  # ledger.json's size at its last fold (`_changed`)
        self._dir_synced_gen = -1  # the generation whose journal's directory entry is durable
        self._unsynced = False  # ledger.json was last rewritten without fsync (`flush` syncs it)
        # Parallel agent tasks (docs/AGENT.md) record their checks from several threads:
        # every mutation and write holds this lock (re-entrant: a transition may save).
        self._lock = threading.RLock()

    @classmethod
    def create(
        cls, path: Path, *, run_id: str, mp_id: str, mp_sha256: str, executor: str, write: bool = True
    ) -> Ledger:
        """A fresh ledger; saved durably unless `write=False` (the caller writes `dumps()`)."""
        model = RunLedger(
            ledger_id=str(uuid.uuid4()),
            run_id=run_id,
            mp_id=mp_id,
            mp_sha256=mp_sha256,
            executor=executor,
            created_at=now_iso(),
        )
        ledger = cls(path, model)
        if write:
            ledger.save()
        return ledger

    @classmethod
    def load(cls, path: Path) -> Ledger:
        """ledger.json with its journal applied (journal.py)."""
        return cls(path, RunLedger.model_validate(journal.read(path)))

    def dumps(self) -> str:
        # Compact: json's C encoder only runs without `indent`, and the ledger is rewritten
        # at every step transition (`jq . ledger.json` to read it).
        return (
            json.dumps(self.model.model_dump(mode="json"), separators=(",", ":"), sort_keys=True, ensure_ascii=False)
            + "\n"
        )

    @_locked
    def save(self, *, durable: bool | None = None, dir_sync: bool = True) -> None:
        """Rewrite ledger.json whole, as a new journal generation, and drop the journal
        (`dir_sync`: as in `atomic_write`)."""
        self.model.journal_gen += 1
        self._dirty.clear()
        durable = self.durable if durable is None else durable
        atomic_write(self.path, self.dumps(), durable=durable, dir_sync=dir_sync)
        self._unsynced = not (durable and dir_sync)
        journal.remove(self.path)  # its lines are of the older generation: ignored if it stays

    @_locked
    def _changed(self, step: LedgerStep, *, durable: bool | None = None) -> None:
        """A step's transition: one line appended to the journal (O(1)); deferred, kept
        for the next `flush`."""
        if self.deferred:
            self._dirty[step.step_id] = step
            return
        self._append([step], durable=self.durable if durable is None else durable)

    @_locked
    def flush(self, *, durable: bool = True) -> None:
        """Write the deferred transitions (journal lines); with `durable`, make the ledger as
        it stands durable: the journal fsynced once (whatever earlier appends of this
        generation skipped), and ledger.json too if its last rewrite skipped fsync."""
        self._append(list(self._dirty.values()), durable=durable)
        self._dirty.clear()

    def _append(self, steps: list[LedgerStep], *, durable: bool) -> None:
        """Journal lines for `steps` (none: only the fsyncs); a full rewrite once the journal
        has grown past the ledger itself (amortised O(1) per step)."""
        size = 0
        if steps:
            lines = [s.model_dump(mode="json") for s in steps]
            size = journal.append(self.path, self.model.journal_gen, lines, durable=durable)
        if durable:
            self._sync(written=bool(steps))
        if size > max(JOURNAL_MIN_BYTES, self._ledger_bytes):
            self.save(durable=durable)
            self._ledger_bytes = self.path.stat().st_size

    def _sync(self, *, written: bool) -> None:
        """After a durable append (`written`: its lines are fsynced) or none: fsync what
        earlier writes skipped, and the directory once for each new journal or rewrite."""
        path = journal.journal_path(self.path)
        exists = written or path.exists()
        if exists and not written:
            fsync_file(path)  # lines appended without fsync
        due = self._unsynced or (exists and self._dir_synced_gen != self.model.journal_gen)
        if self._unsynced:
            fsync_file(self.path)  # a rewrite that skipped fsync: its content, then the rename
            self._unsynced = False
        if due:
            fsync_dir(self.path.parent)  # the journal file itself must survive, not only its lines
            self._dir_synced_gen = self.model.journal_gen if exists else self._dir_synced_gen

    def open_journal(self) -> None:
        """Create this generation's (empty) journal, for `journal_entry_durable`."""
        journal.journal_path(self.path).touch()

    def journal_entry_durable(self) -> None:
        """The journal's directory entry was fsynced (with a new run's): appends to it need
        no directory fsync of their own."""
        if journal.journal_path(self.path).exists():
            self._dir_synced_gen = self.model.journal_gen

    # -- steps ----------------------------------------------------------------------

    def step(self, step_id: str) -> LedgerStep | None:
        return self._index.get(step_id)

    @_locked
    def ensure_step(self, step_id: str, kind: str, key: str) -> LedgerStep:
        """The step with this id, appended as pending if new. Not written: a pending step
        and an absent one mean the same to recovery, and `start` writes it."""
        existing = self.step(step_id)
        if existing is not None:
            return existing
        step = LedgerStep(step_id=step_id, kind=kind, idempotency_key=key)
        self.model.steps.append(step)
        self._index[step_id] = step
        return step

    @_locked
    def start(self, step: LedgerStep) -> None:
        step.status = StepStatus.IN_PROGRESS
        step.attempts += 1
        step.started_at = now_iso()
        step.completed_at = None
        step.pgid = step.proc_start = None
        self._changed(step)

    @_locked
    def spawned(self, step: LedgerStep, pgid: int, proc_start: float | None) -> None:
        step.pgid, step.proc_start = pgid, proc_start
        # Not fsynced: the group id lets a restart kill what a `kill -9` left running; after
        # a power loss there is no process left to kill. Written even when deferred, with
        # the transitions deferred so far.
        self._dirty.pop(step.step_id, None)
        self._append([*self._dirty.values(), step] if self.deferred else [step], durable=False)
        self._dirty.clear()

    @_locked
    def finish(
        self, step: LedgerStep, *, ok: bool, output_ref: str | None, error: str | None = None, **extra: Any
    ) -> None:
        step.status = StepStatus.COMPLETED if ok else StepStatus.FAILED
        step.completed_at = now_iso()
        step.output_ref = output_ref
        step.error = error
        step.pgid = step.proc_start = None
        for k, v in extra.items():
            setattr(step, k, v)
        # Not fsynced: the step's output artifact is written (durably) first, and recovery
        # settles an in-progress step from its artifact.
        self._changed(step, durable=False)

    # -- lifecycle ------------------------------------------------------------------

    @_locked
    def set_outcome(self, outcome: dict[str, Any]) -> None:
        self.model.outcome = outcome
        self.model.status = "finishing"
        self.save()

    @_locked
    def reopen(self, reason: str, *, under: str = "answered") -> None:
        """A run that ended asking a person goes on after the answer (issue #32), or one
        whose pull request a reviewer commented on (issue #41, `under="reviewed"`): its
        outcome is kept under `under`, it is open again and will end with a new one; its
        inbox slot was released at its first end and is left alone."""
        # `answered` and `reviewed` are extra fields of the model: in the file only once a
        # run was answered or reviewed (declared, every ledger would carry an empty one).
        extra = self.model.model_extra
        assert extra is not None  # extra="allow": pydantic keeps them in a dict
        earlier = list(extra.get(under) or [])
        if self.model.outcome is not None:
            earlier.append(self.model.outcome)
        extra[under] = earlier
        self.model.outcome = None
        self.model.status = "open"
        self.model.inbox_entry = "untouched"
        self.model.resume_reason = reason
        self.save()

    @_locked
    def close(self) -> None:
        """The run is done. Its content fsynced (never a torn ledger, which would count as
        an unfilled run), the rename not: a power loss may take it back to `finishing`,
        and finalizing, idempotent, is done again (pipeline/finalize.py)."""
        self.model.status = "closed"
        self.save(dir_sync=False)

    def recover(self, artifact_dir: Path, reason: str) -> Recovery:
        """The spec's CrashRecoveryProcedure for this ledger.

        An in-progress step whose output artifact exists (with its idempotency key) is
        marked completed or failed from that artifact; any other in-progress step becomes
        pending and is flagged `interrupted`. Sets `resume_point` to the first step that
        is pending or failed.
        """
        rec = Recovery(resume_point=None)
        for step in self.model.steps:
            if step.status is not StepStatus.IN_PROGRESS:
                continue
            if step.pgid is not None:
                rec.stale_groups.append((step.pgid, step.proc_start))
            else:
                rec.unrecorded.append(step.step_id)
            artifact = read_artifact(artifact_dir, step)
            if artifact is not None:
                step.status = StepStatus.COMPLETED if artifact.get("ok") else StepStatus.FAILED
                step.completed_at = artifact.get("finished_at") or now_iso()
                step.output_ref = artifact_name(step)
                rec.steps_recovered.append(step.step_id)
            else:
                step.status = StepStatus.PENDING
                step.interrupted = True
                rec.steps_to_retry.append(step.step_id)
            step.pgid = step.proc_start = None
        first = next((s for s in self.model.steps if s.status in (StepStatus.PENDING, StepStatus.FAILED)), None)
        rec.resume_point = first.step_id if first else None
        self.model.resume_point = rec.resume_point
        self.model.resume_reason = reason
        self.model.recoveries.append(
            {
                "at": now_iso(),
                "reason": reason,
                "resume_point": rec.resume_point,
                "steps_recovered": rec.steps_recovered,
                "steps_to_retry": rec.steps_to_retry,
            }
        )
        self.save()
        return rec


def artifact_name(step: LedgerStep) -> str:
    return f"{step.step_id}.exit.json"


def write_artifact(artifact_dir: Path, step: LedgerStep, payload: dict[str, Any], *, durable: bool = True) -> str:
    """Write a step's output artifact (atomically, carrying its idempotency key)."""
    name = artifact_name(step)
    atomic_write_json(
        artifact_dir / name,
        {**payload, "idempotency_key": step.idempotency_key, "finished_at": now_iso()},
        durable=durable,
    )
    return name


def read_artifact(artifact_dir: Path, step: LedgerStep) -> dict[str, Any] | None:
    """The step's output artifact if it exists and belongs to this step's key."""
    try:
        data = json.loads((artifact_dir / artifact_name(step)).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return data if data.get("idempotency_key") == step.idempotency_key else None
