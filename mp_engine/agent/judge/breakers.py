"""Circuit breakers (Loopr's defaults) and the rolling-hour limit on agent calls.

A breaker opens, ending the MP in ERROR, after:
  - `max_no_progress` (3) iterations with no diff, no new commit and no newly passing check;
  - `max_same_error` (5) iterations failing the same way;
  - `max_missing_status` (2) iterations without a valid status block carrying the nonce;
  - `max_test_only` (3) iterations whose status block says WORK_TYPE: tests.
The counters are consecutive and restart when the micro-task or the level changes: a new
model deserves a fresh start, and escalation is the first answer to repeated failure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from mp_engine.config.agent import AgentConfig


@dataclass
class Breakers:
    no_progress: int = 0
    same_error: int = 0
    last_error: str | None = None
    missing_status: int = 0
    test_only: int = 0

    def reset(self) -> None:
        self.no_progress = self.same_error = self.missing_status = self.test_only = 0
        self.last_error = None

    def observe(self, *, progress: bool, error: str | None, status_ok: bool, work_type: str | None) -> None:
        """Count one failed iteration."""
        self.no_progress = 0 if progress else self.no_progress + 1
        if error and error == self.last_error:
            self.same_error += 1
        else:
            self.same_error = 1 if error else 0
        self.last_error = error
        self.missing_status = 0 if status_ok else self.missing_status + 1
        self.test_only = self.test_only + 1 if work_type == "tests" else 0

    def tripped(self, cfg: AgentConfig) -> tuple[str, str] | None:
        """(breaker name, what happened) of the first open breaker, or None."""
        if self.missing_status >= cfg.max_missing_status:
            return "missing_status", f"{self.missing_status} iterations in a row without a valid status block"
        if self.no_progress >= cfg.max_no_progress:
            return (
                "no_progress",
                f"{self.no_progress} iterations in a row without a diff, a commit or a newly passing check",
            )
        if self.same_error >= cfg.max_same_error:
            return "same_error", f"the same failure {self.same_error} iterations in a row: {self.last_error}"
        if self.test_only >= cfg.max_test_only:
            return "test_only", f"{self.test_only} iterations in a row that only ran tests"
        return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
