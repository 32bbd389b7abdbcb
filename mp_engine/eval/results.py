"""The eval's record: `results.jsonl`, one line per judged task and configuration, appended
durably once the verdict is known. It is the truth a resumed eval starts from: a pair with a
line is never run or judged again; a pair without one is (issue #43)."""

from __future__ import annotations

import json
import threading
from enum import StrEnum
from pathlib import Path
from typing import Any

from mp_engine.core.atomic import append_durable


class Verdict(StrEnum):
    RESOLVED = "resolved"  # every FAIL_TO_PASS test passes and every PASS_TO_PASS test still does
    UNRESOLVED = "unresolved"  # the agent's work did not make the judging tests pass
    ENV_ERROR = "env_error"  # the environment could not be set up, or the task cannot judge: not the agent's
    ERROR = "error"  # the run could not be carried out (the harness's or the engine's failure: see the log)


AGENT_VERDICTS = (Verdict.RESOLVED, Verdict.UNRESOLVED)  # what a resolve rate counts


def key(config: str, iid: str) -> tuple[str, str]:
    return (config, iid)


class Results:
    """The lines of `results.jsonl`, read once and appended under a lock (tasks judged at once)."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}
        if path.exists():
            text = path.read_text(encoding="utf-8")
            if text and not text.endswith("\n"):  # a line a kill cut short: the next starts on its own
                append_durable(path, "")
            for line in text.splitlines():
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a line a kill cut short: that pair was not judged
                if isinstance(row, dict) and "config" in row and "instance_id" in row:
                    self.rows[key(row["config"], row["instance_id"])] = row

    def judged(self, config: str, iid: str) -> bool:
        return key(config, iid) in self.rows

    def add(self, row: dict[str, Any]) -> None:
        with self._lock:
            k = key(row["config"], row["instance_id"])
            if k in self.rows:  # never judged twice, whatever a caller does
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            append_durable(self.path, json.dumps(row, sort_keys=True))
            self.rows[k] = row

    def all(self) -> list[dict[str, Any]]:
        return list(self.rows.values())
