"""What wakes the dashboard's event stream: a look at the few files whose change means
the page is out of date (the state file, the event log, the queue, the running run's
ledger, progress and current outputs), taken every half second by each open stream. A look
is a handful of stat calls, cheaper than an observer on the whole archive; the files
stay the truth, the look only says when to read them again (bench figure 19)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from mp_engine.core.workspace import RUN_LEDGER, Workspace
from mp_engine.record.journal import journal_path

REFRESH = 30.0  # seconds after which a page is sent again anyway (ages and elapsed times move)


class Watch:
    def __init__(self, ws: Workspace, refresh: float = REFRESH):
        self.ws = ws
        self.refresh = refresh
        self.paths: list[Path] = self.base()
        self.seen: tuple[Any, ...] | None = None
        self.sent_at = 0.0

    def base(self) -> list[Path]:
        ws = self.ws
        return [ws.state_file, ws.events_file, ws.inbox_file, ws.local_dir / "queue" / "queue.json"]

    def follow(self, doc: dict[str, Any]) -> None:
        """Watch what the page just sent shows: the running run's files."""
        self.paths = self.base()
        run_id = (doc.get("state") or {}).get("run_id")
        if run_id:
            run = self.ws.runs_dir / str(run_id)
            self.paths += [run / RUN_LEDGER, journal_path(run / RUN_LEDGER), run / "agent" / "progress.json"]
            step = doc.get("step") or {}
            if step.get("id"):
                self.paths += [run / "steps" / f"{step['id']}.stdout", run / "steps" / f"{step['id']}.stderr"]
        self.seen = self.look()
        self.sent_at = time.monotonic()

    def look(self) -> tuple[Any, ...]:
        out: list[tuple[int, int] | None] = []  # (mtime, size), None for a file that is not there
        for p in self.paths:
            try:
                st = os.stat(p)
                out.append((st.st_mtime_ns, st.st_size))
            except OSError:
                out.append(None)
        return tuple(out)

    def changed(self) -> bool:
        """True the first time, when a watched file changed, or after `refresh` seconds."""
        return self.seen is None or time.monotonic() - self.sent_at >= self.refresh or self.look() != self.seen
