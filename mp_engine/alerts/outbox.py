"""Alerts not delivered yet, on disk (`SYSTEM/.engine/alerts.jsonl`): an alert that the
receiver could not take before the engine stopped is sent after the next start. One line
per alert added (`{"add": ...}`) and per alert done (`{"done": id}`); emptied when nothing
is pending."""

from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path

from mp_engine.alerts.rules import Alert
from mp_engine.core.atomic import append_durable


class Outbox:
    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    def add(self, alert: Alert) -> Alert:
        alert.id = alert.id or uuid.uuid4().hex[:12]
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            append_durable(self.path, json.dumps({"add": alert.to_dict()}, ensure_ascii=False), durable=False)
        return alert

    def done(self, alert: Alert) -> None:
        with self._lock:
            append_durable(self.path, json.dumps({"done": alert.id}), durable=False)
            if not self._pending():
                os.unlink(self.path)

    def pending(self) -> list[Alert]:
        """What was added and not done, oldest first."""
        with self._lock:
            return self._pending()

    def _pending(self) -> list[Alert]:
        added: dict[str, Alert] = {}
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:  # a line a crash cut short
                continue
            if "add" in rec:
                a = Alert.from_dict(rec["add"])
                added[a.id] = a
            elif "done" in rec:
                added.pop(rec["done"], None)
        return list(added.values())
