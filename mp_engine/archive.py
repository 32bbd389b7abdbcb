"""The run archive: one directory per MP run under `SYSTEM/runs/`, the lasting record.

    SYSTEM/runs/<UTC stamp>-<MP id>/
        incoming_microproject.txt   the MP exactly as received (copied before anything runs)
        ledger.json                 the run ledger (see ledger.py)
        steps/                      per step: script, stdout, stderr, exit artifact
        inbox_entry                 an inbox entry that was not a readable file, moved here
        RESULT.md, result.json      the result, as also written to SYSTEM/RESULT_last.md

A run directory appears atomically (built under a temp name, then renamed), so it either
holds the MP copy and a ledger or does not exist.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from mp_engine.atomic import TEMP_MARKER, make_durable
from mp_engine.clock import compact_stamp
from mp_engine.ledger import Ledger
from mp_engine.workspace import INBOX_FILE, Workspace

LEDGER = "ledger.json"


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

    def make_durable(self) -> None:
        """fsync what `create_run` wrote: the MP copy, the ledger, the run directory and its entry."""
        make_durable(*(p for p in (self.mp_copy, self.ledger_path, self.steps_dir) if p.exists()), self.dir)


def _label(mp_id: str | None) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", mp_id) if mp_id else "UNPARSED"


def create_run(
    ws: Workspace, *, mp_id: str | None, data: bytes | None, mp_sha256: str, executor: str, durable: bool = True
) -> tuple[RunArchive, Ledger]:
    """Create a run directory holding the MP copy (when readable) and a fresh ledger.

    With `durable=False` nothing is fsynced yet (the claim path publishes RUNNING first);
    the caller must call `run.make_durable()` before the run has any side effect.
    """
    ws.runs_dir.mkdir(parents=True, exist_ok=True)
    base = f"{compact_stamp()}-{_label(mp_id)}"
    tmp = ws.runs_dir / f".{base}{TEMP_MARKER}{secrets.token_hex(4)}"
    tmp.mkdir()
    (tmp / "steps").mkdir()
    # Plain writes: the directory is private until the rename below publishes it whole.
    if data is not None:
        (tmp / INBOX_FILE).write_bytes(data)
    for n in range(1, 10_000):
        final = ws.runs_dir / (base if n == 1 else f"{base}-{n}")
        ledger = Ledger.create(
            tmp / LEDGER,
            run_id=final.name,
            mp_id=mp_id or "UNPARSED",
            mp_sha256=mp_sha256,
            executor=executor,
            write=False,
        )
        (tmp / LEDGER).write_text(ledger.dumps(), encoding="utf-8")
        try:
            os.rename(tmp, final)  # fails if `final` exists and is non-empty
        except OSError:
            continue
        ledger.path = final / LEDGER
        run = RunArchive(final)
        if durable:
            run.make_durable()
        return run, ledger
    raise RuntimeError(f"could not allocate a run directory under {ws.runs_dir}")


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
