"""What `mp-engine loop` shows while its MP runs (issue #34): each task's state, level,
iteration and residual, and the time since the start, fed by the engine's events (the
same records the event log keeps).

On a terminal a table redrawn in place four times a second (the cursor moved back over it
with ANSI escapes, each line cut to the terminal's width so none wraps); through a pipe one
plain line per thing that happened (a task's iteration started or ended, a task passed,
escalated or was skipped, the run ended), so a log file or a CI job reads it top to bottom.
Everything shown from an MP or an agent has its control characters escaped first.

No display library: rich would do the redraw, but with it installed structlog imports it
in every engine process (+90 ms and +4.6 MB at start, measured), for a table of five columns.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from mp_engine.core.terminal import escape_controls


@dataclass
class TaskRow:
    mt: str
    status: str = "pending"
    level: str = "-"
    iteration: int = 0
    residual: float | None = None


class LoopView:
    """The run as the events tell it; `line(record)` is the plain line for an event."""

    def __init__(self, mp_id: str, title: str, clock: Callable[[], float] = time.monotonic):
        self.mp_id, self.title = mp_id, escape_controls(title)
        self.clock = clock
        self.t0 = clock()
        self.rows: dict[str, TaskRow] = {}
        self.last = "waiting for the engine to take the MP"
        self._lock = threading.Lock()  # events come from the engine's threads (parallel tasks)

    def elapsed(self) -> str:
        s = int(self.clock() - self.t0)
        return f"{s // 60:02d}:{s % 60:02d}"

    def row(self, mt: str) -> TaskRow:
        return self.rows.setdefault(mt, TaskRow(mt))

    def apply(self, rec: dict[str, Any]) -> str | None:
        """Take one event; return its plain line, or None for one not shown."""
        with self._lock:
            text = self._apply(rec)
            if text is not None:
                self.last = text
            return text

    def _apply(self, rec: dict[str, Any]) -> str | None:
        event, mt = rec.get("event"), rec.get("mt")
        if event == "micro_task_loop_started":
            for name in rec.get("micro_tasks", []):
                self.row(name)
            return f"{self.mp_id}: {len(self.rows)} micro-task(s): {', '.join(self.rows)}"
        if event == "micro_task_iteration_started" and mt:
            r = self.row(mt)
            r.status, r.iteration, r.level = "running", rec.get("iteration", 0), str(rec.get("agent") or "-")
            return f"{mt} iteration {r.iteration}, level {rec.get('level')} ({r.level}): started"
        if event == "micro_task_iteration_complete" and mt:
            r = self.row(mt)
            r.residual = rec.get("residual")
            gate = "checks passed" if rec.get("gate") else f"residual {rec.get('residual')}"
            return f"{mt} iteration {rec.get('iteration')}: {gate} (call {rec.get('call')})"
        if event == "micro_task_complete" and mt:
            self.row(mt).status = "completed"
            return f"{mt} completed"
        if event == "micro_task_escalated" and mt:
            self.row(mt).status = "escalated"
            return f"{mt} escalated to level {rec.get('to_level')}"
        if event == "micro_task_skipped" and mt:
            self.row(mt).status = "skipped"
            return f"{mt} skipped: {escape_controls(str(rec.get('why', '')))}"
        if event in ("micro_task_loop_completed", "micro_task_loop_failed", "micro_task_loop_cancelled"):
            return f"agent loop ended: certificate {rec.get('certificate')} ({rec.get('reason')})"
        return None

    def table(self) -> list[str]:
        """The run now, as the lines of a terminal's display."""
        with self._lock:
            rows = [("task", "status", "level", "iteration", "residual")]
            for r in self.rows.values():
                residual = "-" if r.residual is None else f"{r.residual:g}"
                rows.append((r.mt, r.status, r.level, str(r.iteration or "-"), residual))
            widths = [max(len(row[i]) for row in rows) for i in range(5)]
            lines = [f"{self.mp_id} {self.title}  [{self.elapsed()}]"]
            lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
            return [*lines, escape_controls(self.last)]


class PlainOut:
    """Through a pipe: one line per shown event, with the time since the start."""

    def __init__(self, view: LoopView, out: TextIO):
        self.view, self.out = view, out

    def __call__(self, rec: dict[str, Any]) -> None:
        text = self.view.apply(rec)
        if text is not None:
            print(f"[{self.view.elapsed()}] {text}", file=self.out, flush=True)

    def __enter__(self) -> PlainOut:
        print(f"[{self.view.elapsed()}] {self.view.mp_id} {self.view.title}: dropped", file=self.out, flush=True)
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class LiveOut:
    """On a terminal: the table, redrawn in place four times a second by a thread of its own."""

    INTERVAL = 0.25

    def __init__(self, view: LoopView, out: TextIO):
        self.view, self.out = view, out
        self.drawn = 0  # lines on screen from the last draw
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="mp-loop-view", daemon=True)

    def __call__(self, rec: dict[str, Any]) -> None:
        self.view.apply(rec)

    def draw(self) -> None:
        width = max(20, shutil.get_terminal_size().columns - 1)
        lines = [ln[:width] for ln in self.view.table()]
        up = f"\x1b[{self.drawn}F" if self.drawn else ""  # to the first line drawn last time
        self.out.write(up + "\x1b[J" + "\n".join(lines) + "\n")
        self.out.flush()
        self.drawn = len(lines)

    def _run(self) -> None:
        while not self.done.wait(self.INTERVAL):
            self.draw()

    def __enter__(self) -> LiveOut:
        self.out.write("\x1b[?25l")  # no cursor blinking over the table
        self.draw()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()
        self.draw()  # the final state stays on screen
        self.out.write("\x1b[?25h")
        self.out.flush()
