"""The `Outcome` of a run: what RESULT_last.md and result.json say, as data.

The outcome is stored in the run ledger before anything is rendered, so a crash between
"the MP ended" and "the result is written" re-renders the same result on restart.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mp_engine.record.diagnosis import Diagnosis

COMPLETED = "COMPLETED"
ERROR = "ERROR"
SUPERSEDED = "SUPERSEDED"  # replaced by a newer MP before it ran (docs/PROTOCOL.md §2)
CANCELLED = "CANCELLED"  # stopped, or never started, because the orchestrator or operator asked
# Statuses that end a run without a halt: the MP ran to the end, never had to run, or
# was stopped on request.
NO_HALT = (COMPLETED, SUPERSEDED, CANCELLED)


@dataclass
class StepReport:
    step_id: str
    kind: str  # command | file | check
    what: str
    line: int | None = None
    status: str = "not run"  # ok | failed | cancelled | not run
    exit_code: int | None = None
    duration: float | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_ref: str | None = None
    stderr_ref: str | None = None
    note: str | None = None
    attempts: int = 0


@dataclass
class Outcome:
    status: str  # COMPLETED | ERROR | SUPERSEDED | CANCELLED
    mp_id: str
    title: str
    run_id: str
    mp_sha256: str
    started_at: str
    finished_at: str
    duration: float = 0.0
    executor: str = "shell"
    steps: list[StepReport] = field(default_factory=list)
    checks: list[StepReport] = field(default_factory=list)
    diagnosis: Diagnosis | None = None
    error_output: str = ""
    error_output_ref: str | None = None
    notes: list[str] = field(default_factory=list)
    halt_token: str | None = None  # what `Approves:` must name to lift the halt
    extra: dict[str, Any] = field(default_factory=dict)  # executor-specific sections

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["diagnosis"] = self.diagnosis.to_dict() if self.diagnosis else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        data = dict(data)
        data["steps"] = [StepReport(**s) for s in data.get("steps", [])]
        data["checks"] = [StepReport(**s) for s in data.get("checks", [])]
        data["diagnosis"] = Diagnosis.from_dict(data["diagnosis"]) if data.get("diagnosis") else None
        return cls(**data)

    @property
    def commit_summary(self) -> str:
        """`MP-1.4: COMPLETED` or `MP-1.4: ERROR (timeout in step 2)`."""
        if self.status in NO_HALT or self.diagnosis is None:
            return f"{self.mp_id}: {self.status}"
        return f"{self.mp_id}: {self.status} ({self.diagnosis.summary})"


def read_capped(path: Path, cap: int) -> tuple[str, int]:
    """Text of the file at `path` cut to about `cap` bytes (head and tail kept), and the
    number of bytes omitted from the middle. Reads only what it shows."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return "", 0
    with open(path, "rb") as f:
        if size <= cap:
            return f.read().decode("utf-8", errors="replace"), 0
        head = f.read(cap // 2)
        f.seek(size - (cap - cap // 2))
        tail = f.read()
    omitted = size - len(head) - len(tail)
    text = head.decode("utf-8", errors="replace") + f"\n[... {omitted} bytes omitted ...]\n"
    return text + tail.decode("utf-8", errors="replace"), omitted


def fenced(text: str, info: str = "text") -> str:
    """`text` in a code fence longer than any backtick run inside it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text.rstrip(chr(10))}\n{fence}"
