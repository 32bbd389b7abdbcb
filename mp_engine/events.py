"""The event log: the flight recorder under `SYSTEM/events.jsonl`.

Every state transition and every stage's notable moment is appended as one JSON line
with a timestamp, durably (O_APPEND + fsync), and mirrored to the structured log.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from mp_engine.atomic import append_durable, make_durable
from mp_engine.clock import now_iso

log = structlog.get_logger("mp_engine")


class EventLog:
    """Append-only JSON-lines log; `redact` scrubs each line before it is written."""

    def __init__(self, path: Path, redact: Callable[[str], str] | None = None):
        self.path = Path(path)
        self.redact = redact or (lambda text: text)
        self._lock = threading.Lock()
        # False while an executor batches its writes (the agent loop): lines are appended
        # without fsync, and the executor calls `sync()` when its loop ends or pauses.
        self.durable = True

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        record = {"ts": now_iso(), "event": event, **{k: v for k, v in fields.items() if v is not None}}
        line = self.redact(json.dumps(record, ensure_ascii=False, default=str, sort_keys=False))
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            append_durable(self.path, line, durable=self.durable)
        log.info(event, **{k: v for k, v in json.loads(line).items() if k not in ("ts", "event")})
        return record

    def sync(self) -> None:
        """fsync the log (after appends made with `durable = False`)."""
        with self._lock:
            if self.path.exists():
                make_durable(self.path)

    def read(self) -> list[dict[str, Any]]:
        """All events, oldest first (used by tests and `status`)."""
        if not self.path.exists():
            return []
        out = []
        for raw in self.path.read_text(encoding="utf-8").splitlines():
            if raw.strip():
                out.append(json.loads(raw))
        return out
