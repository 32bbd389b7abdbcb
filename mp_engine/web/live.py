"""What wakes the dashboard's event streams: a look at the few files whose change means
the page is out of date (the state file, the event log, the queue, the running run's
ledger, progress and current outputs), taken every half second by one watcher for every
open stream (`Feed`). A look is a handful of stat calls, cheaper than an observer on the
whole archive; the files stay the truth, the look only says when to read them again
(bench figure 19)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Awaitable, Callable
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


class Feed:
    """One watcher for every open event stream (issue #46: 400 streams were 400 stat loops,
    400 file descriptors and a thread pool's worth of renders). While any stream is open,
    one task looks every `tick` seconds; when the page is out of date it renders once and
    hands the same event to every stream. A stream that joins gets the last event at once.
    `per_client` and `total` cap the streams; `join` says None past either."""

    def __init__(
        self,
        watch: Watch,
        render: Callable[[], Awaitable[tuple[dict[str, Any], str]]],
        *,
        tick: float,
        stop: threading.Event,
        per_client: int,
        total: int,
    ):
        self.watch, self.render, self.tick, self.stop = watch, render, tick, stop
        self.per_client, self.total = per_client, total
        self.streams: dict[int, tuple[str, asyncio.Queue[str | None]]] = {}
        self.latest: str | None = None
        self.looks = 0  # how many looks the one watcher took (tests, bench)
        self._task: asyncio.Task[None] | None = None

    def join(self, client: str) -> tuple[int, asyncio.Queue[str | None]] | None:
        """A new stream's key and queue, or None when a cap is reached."""
        mine = sum(1 for who, _ in self.streams.values() if who == client)
        if len(self.streams) >= self.total or mine >= self.per_client:
            return None
        queue: asyncio.Queue[str | None] = asyncio.Queue(maxsize=1)
        if self.latest is not None:
            queue.put_nowait(self.latest)
        key = id(queue)
        self.streams[key] = (client, queue)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        return key, queue

    def leave(self, key: int) -> None:
        self.streams.pop(key, None)

    async def _run(self) -> None:
        while self.streams and not self.stop.is_set():
            self.looks += 1
            if self.watch.changed():
                doc, event = await self.render()
                self.watch.follow(doc)
                self.latest = event
                for _, queue in list(self.streams.values()):
                    _replace(queue, event)
            await asyncio.sleep(self.tick)
        if self.stop.is_set():
            for _, queue in list(self.streams.values()):
                _replace(queue, None)  # the server stops: every stream ends


def _replace(queue: asyncio.Queue[str | None], item: str | None) -> None:
    """A stream that has not sent the last event yet gets only the newest."""
    if queue.full():
        queue.get_nowait()
    queue.put_nowait(item)
