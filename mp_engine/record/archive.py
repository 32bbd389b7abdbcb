"""The run archive: one directory per MP run under `SYSTEM/runs/`, the lasting record.

    SYSTEM/runs/<UTC stamp>-<MP id>/
        incoming_microproject.txt   the MP exactly as received (copied before anything runs)
        ledger.json                 the run ledger (see ledger.py)
        steps/                      per step: script, stdout, stderr, exit artifact
        inbox_entry                 an inbox entry that was not a readable file, moved here
        RESULT.md, result.json      the result, as also written to SYSTEM/RESULT_last.md and .json

A claim reserves the run id with one `mkdir`, publishes RUNNING naming it, then writes
the MP copy and the ledger (fsynced before the first step). A run without a readable
ledger is therefore a claim that crashed in that window: the next recovery pass removes
it (`sweep_unfilled_runs`) and claims the MP, still in the inbox, again.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from mp_engine.core.atomic import TEMP_MARKER, make_durable
from mp_engine.core.clock import compact_stamp
from mp_engine.core.workspace import EVENTS_FILE, INBOX_FILE, RUN_LEDGER, Workspace
from mp_engine.record.journal import journal_path
from mp_engine.record.ledger import Ledger

LEDGER = RUN_LEDGER


@dataclass(frozen=True)
class RunArchive:
    dir: Path

    @property
    def run_id(self) -> str:
        return self.dir.name

    @property
    def mp_copy(self) -> Path:
        return self.dir / INBOX_FILE

    @property
    def ledger_path(self) -> Path:
        return self.dir / LEDGER

    @property
    def steps_dir(self) -> Path:
        return self.dir / "steps"

    @property
    def result_md(self) -> Path:
        return self.dir / "RESULT.md"

    @property
    def result_json(self) -> Path:
        return self.dir / "result.json"

    @property
    def moved_entry(self) -> Path:
        return self.dir / "inbox_entry"

    def ledger(self) -> Ledger:
        return Ledger.load(self.ledger_path)

    def make_durable(self, ledger: Ledger | None = None) -> None:
        """fsync what `create_run` wrote: the MP copy, the ledger, the run directory and its
        entry; the (empty) journal's entry and `steps/` with them (an empty directory needs
        only its parent's fsync), which `ledger` is told."""
        make_durable(*(p for p in (self.mp_copy, self.ledger_path) if p.exists()), self.dir)
        if ledger is not None:
            ledger.journal_entry_durable()


JOURNAL = journal_path(Path(RUN_LEDGER)).name  # created empty with the ledger (`fill_run`)


def _label(mp_id: str | None) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", mp_id) if mp_id else "UNPARSED"


def create_run(
    ws: Workspace,
    *,
    mp_id: str | None,
    data: bytes | None,
    mp_sha256: str,
    executor: str,
    source: str | None = None,
    inbox_entry: str = "delete",
) -> tuple[RunArchive, Ledger]:
    """A new run holding the MP copy (when readable) and a fresh ledger, fsynced."""
    run = reserve_run(ws, mp_id)
    ledger = fill_run(
        run, mp_id=mp_id, data=data, mp_sha256=mp_sha256, executor=executor, source=source, inbox_entry=inbox_entry
    )
    run.make_durable(ledger)
    return run, ledger


def reserve_run(ws: Workspace, mp_id: str | None) -> RunArchive:
    """Reserve a run id with one `mkdir` (unique: it fails if the name exists).

    The claim publishes RUNNING naming the run before writing its archive (`fill_run`),
    so drop -> RUNNING costs one directory and the one durable state write. A crash in
    between leaves a run without a ledger; the next pass removes it
    (`sweep_unfilled_runs`) and claims the MP, still in the inbox, again."""
    ws.runs_dir.mkdir(parents=True, exist_ok=True)
    base = f"{compact_stamp()}-{_label(mp_id)}"
    for n in range(1, 10_000):
        final = ws.runs_dir / (base if n == 1 else f"{base}-{n}")
        try:
            os.mkdir(final)
        except FileExistsError:
            continue
        return RunArchive(final)
    raise RuntimeError(f"could not allocate a run directory under {ws.runs_dir}")


def fill_run(
    run: RunArchive,
    *,
    mp_id: str | None,
    data: bytes | None,
    mp_sha256: str,
    executor: str,
    source: str | None = None,
    inbox_entry: str = "delete",
) -> Ledger:
    """Write the MP copy and a fresh ledger into a reserved run, without fsync (the caller
    calls `run.make_durable()` before the run has any side effect). Plain writes: a ledger
    cut short by a crash does not parse, and the run then counts as unfilled."""
    run.steps_dir.mkdir(exist_ok=True)
    if data is not None:
        run.mp_copy.write_bytes(data)
    ledger = Ledger.create(
        run.ledger_path,
        run_id=run.run_id,
        mp_id=mp_id or "UNPARSED",
        mp_sha256=mp_sha256,
        executor=executor,
        write=False,
    )
    ledger.model.source = source
    ledger.model.inbox_entry = inbox_entry  # type: ignore[assignment]
    run.ledger_path.write_text(ledger.dumps(), encoding="utf-8")
    ledger.open_journal()  # its entry is made durable with the run's: a step's start costs one fsync
    return ledger


def runs_of(ws: Workspace, mp_id: str, mp_sha256: str, newest: int = 20) -> list[RunArchive]:
    """Earlier runs of these exact MP bytes among the `newest` runs of that MP id, newest
    first (found by the MP id in the run's name, confirmed by the SHA-256 in its ledger).
    A copy put back by git belongs to a recent run; older ones are not read."""
    label = _label(mp_id)
    try:
        names = sorted(
            (n for n in os.listdir(ws.runs_dir) if n.endswith(f"-{label}") or f"-{label}-" in n), reverse=True
        )
    except FileNotFoundError:
        return []
    names = names[:newest]
    found = []
    for name in names:
        try:
            if json.loads((ws.runs_dir / name / LEDGER).read_text(encoding="utf-8")).get("mp_sha256") == mp_sha256:
                found.append(RunArchive(ws.runs_dir / name))
        except (OSError, ValueError):
            continue
    return found


def sweep_unfilled_runs(ws: Workspace) -> list[Path]:
    """Remove runs whose ledger is missing or unreadable: reserved by a claim that crashed
    before `fill_run` finished (its MP is still in the inbox). Call with the workspace lock
    held, or another engine's claim in progress could be taken for one."""
    removed = []
    try:
        dirs = [d for d in ws.runs_dir.iterdir() if d.is_dir() and TEMP_MARKER not in d.name]
    except FileNotFoundError:
        return []
    for d in dirs:
        try:
            json.loads((d / LEDGER).read_text(encoding="utf-8"))
            continue
        except (OSError, ValueError):
            pass
        try:  # only what a claim writes before its ledger: anything else is an archive to keep
            names = {p.name for p in d.iterdir()}
            unfilled = names <= {"steps", INBOX_FILE, LEDGER, EVENTS_FILE, JOURNAL} and not any((d / "steps").glob("*"))
            unfilled = unfilled and (JOURNAL not in names or (d / JOURNAL).stat().st_size == 0)  # no step started
        except OSError:
            continue
        if unfilled:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def open_runs(ws: Workspace) -> list[RunArchive]:
    """Runs whose ledger is not closed, oldest first (the spec's recovery scan)."""
    found = []
    try:
        dirs = sorted(d for d in ws.runs_dir.iterdir() if d.is_dir() and TEMP_MARKER not in d.name)
    except FileNotFoundError:
        return []
    for d in dirs:
        run = RunArchive(d)
        try:
            if run.ledger().model.status != "closed":
                found.append(run)
        except (FileNotFoundError, ValueError):
            continue
    return found


def sweep_incomplete_runs(ws: Workspace) -> list[Path]:
    """Remove half-built run directories (temp names) left by a crash."""
    removed = []
    try:
        for d in ws.runs_dir.iterdir():
            if d.is_dir() and TEMP_MARKER in d.name:
                shutil.rmtree(d, ignore_errors=True)
                removed.append(d)
    except FileNotFoundError:
        pass
    return removed
