"""What the orchestrator sent and saw: one `Sent` per MP id, with the result lines the remote
showed for it, in order, and when. Deciding whether an MP is done, and what a result asks
of the orchestrator next (an approval, an answer), is here, as data; the driver acts on it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from bench.soak.workload import Kind


@dataclass
class Sent:
    mp_id: str
    kind: str
    expects: tuple[str, ...]
    route: str
    sent_at: float = field(default_factory=time.time)
    lines: list[dict[str, Any]] = field(default_factory=list)  # the remote's result lines for it
    seen_at: list[float] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)  # "ERROR disk_full", "SUPERSEDED", ...
    followed: int = 0  # how many of its lines were acted on

    @property
    def statuses(self) -> tuple[str, ...]:
        return tuple(str(e.get("status")) for e in self.lines)

    @property
    def done(self) -> bool:
        """Its last result is in: the one expected (all of them), or one that was not."""
        if self.unexpected:
            return True
        return bool(self.expects) and self.statuses == self.expects

    @property
    def latency(self) -> float | None:
        return self.seen_at[-1] - self.sent_at if self.done and self.seen_at else None


def next_action(s: Sent, line: dict[str, Any], doc: dict[str, Any] | None) -> str | None:
    """What the orchestrator does about result `line` of MP `s`: "answer" (it asks, a
    person answers), "approve" (the engine halts on it), or None; records what was not
    expected. `doc` is the run's result document when the line is an ERROR."""
    n = len(s.lines) - 1  # the index of `line` among its results
    status = str(line.get("status"))
    wanted = s.expects[n] if n < len(s.expects) else None
    if status != wanted:
        kind = ((doc or {}).get("diagnosis") or {}).get("kind")
        s.unexpected.append(f"{status} {kind}" if kind else status)
        return "approve" if status == "ERROR" else None
    if status == "ERROR" and s.kind in (Kind.PAUSE, Kind.QUESTION):
        if (doc or {}).get("answerable"):
            return "answer"
        # An ERROR that asks nothing (the disk was full as it started): not the one expected,
        # and the approval ends the MP (no COMPLETED follows).
        kind = ((doc or {}).get("diagnosis") or {}).get("kind")
        s.unexpected.append(f"ERROR {kind}" if kind else "ERROR")
        return "approve"
    if status == "ERROR":
        return "approve"
    return None
