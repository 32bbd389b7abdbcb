"""The executor interface."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from mp_engine.config.load import Config
from mp_engine.execute.steps import StepContext
from mp_engine.inbox.mpfile import MicroProject
from mp_engine.record.diagnosis import Diagnosis
from mp_engine.record.outcome import StepReport


@dataclass
class ExecResult:
    # "waiting": paused until extra["waiting"]["resume_at"] (agent rate/usage limits); the run stays open
    status: Literal["completed", "failed", "interrupted", "waiting", "cancelled"]
    steps: list[StepReport] = field(default_factory=list)
    checks: list[StepReport] = field(default_factory=list)
    diagnosis: Diagnosis | None = None
    error_output: str = ""
    error_output_ref: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Executor(Protocol):
    """An executor. One optional attribute: `works_on_repos = True` says it runs an MP's
    `Repo:` (issue #41) in that repository's worktree; admission refuses `Repo:` for an
    executor without it, rather than run the work on the channel's repository."""

    name: str

    def time_budget(self, config: Config) -> tuple[float, str]:
        """The MP's time budget without a `Timeout:` header: (seconds, source)."""

    def validate(self, mp: MicroProject) -> None:
        """Raise `InvalidMPError` if this executor cannot run the MP at all."""

    def settings(self, config: Config, mp: MicroProject) -> Config:
        """The configuration `mp` runs with: its headers may set this executor's settings
        for it (`InvalidMPError`, with the fix, when they cannot apply)."""

    def run(self, ctx: StepContext) -> ExecResult:
        """Carry out the MP; return when it completed, failed or was interrupted."""
