"""The channel with git off: every sync point is a no-op (dramatiq's `StubBroker` idea).

The engine always talks to a channel, so it has no `if sync is not None` branches; with
`[git] enabled = false` this one stands in for `GitChannel`.
"""

from __future__ import annotations

from typing import Any

from mp_engine.core.errors import InvalidMPError
from mp_engine.record.archive import RunArchive
from mp_engine.sync.pull import SyncOutcome


class LocalChannel:
    enabled = False
    unreachable: str | None = None

    def startup(self) -> None:
        pass

    def close(self) -> None:
        pass

    def next_poll_at(self) -> float:
        return float("inf")

    def due(self, now: float | None = None) -> bool:
        return False

    def poll(self) -> SyncOutcome:
        return SyncOutcome()

    def running(self, mp_id: str, run_id: str) -> SyncOutcome:
        return SyncOutcome()

    def publish(self, message: str, run_id: str | None) -> SyncOutcome:
        return SyncOutcome()

    def push_branch(self, branch: str) -> None:
        pass

    peek_interval = float("inf")

    def peek_cancel(self) -> bytes | None:
        return None

    def stopping(self) -> None:
        pass

    def commit_state(self, message: str, *, if_naming: dict[str, Any] | None = None) -> SyncOutcome:
        return SyncOutcome()

    def earlier_run(self, mp_id: str, sha256: str, data: bytes) -> RunArchive | None:
        return None  # without git, every file dropped into the inbox is a new arrival

    def refusal_for(self, data: bytes) -> InvalidMPError | None:
        return None

    def notice(self) -> str | None:
        return None

    def report(self) -> dict[str, Any]:
        return {"enabled": False}
