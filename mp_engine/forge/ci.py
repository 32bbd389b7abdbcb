"""CI on a push, decided in pure functions: what the checks say (`judge`, an ordered table
of rules over one `CiReport`), what the run does next (`next_step`), and the text a
failing check gives the next prompt (`failure_text`, the only one that asks the forge).

A round is one push and the CI result on it; at most `[repos.NAME] ci_rounds` rounds may
answer red CI with a fix. Waiting costs nothing against the rate limit while nothing
changes (conditional requests, github.py); `poll_delay` spaces the polls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from mp_engine.core.errors import ForgeError
from mp_engine.forge.base import Check, CiReport, Forge

NO_CI_GRACE = 60.0  # seconds without any check before a repository counts as having no CI


class CiState(StrEnum):
    WAITING = "waiting"  # checks are queued or running (or none has appeared yet)
    PASSED = "passed"  # every check passed
    FAILED = "failed"  # every check finished, and one failed (or time ran out after one failed)
    NO_CI = "no_ci"  # no check appeared: treated as passed, and said so
    TIMED_OUT = "timed_out"  # ci_timeout ran out with checks still running, none failed


@dataclass(frozen=True)
class CiVerdict:
    state: CiState
    failing: tuple[Check, ...] = ()
    pending: tuple[Check, ...] = ()

    @property
    def green(self) -> bool:
        return self.state in (CiState.PASSED, CiState.NO_CI)

    def describe(self) -> str:
        names = ", ".join(c.name for c in self.failing or self.pending)
        return {
            CiState.WAITING: f"waiting for CI ({names or 'no check yet'})",
            CiState.PASSED: "CI passed",
            CiState.FAILED: f"CI failed: {names}",
            CiState.NO_CI: "the repository has no CI: no check appeared, treated as passed",
            CiState.TIMED_OUT: f"CI did not finish within ci_timeout: {names} still running",
        }[self.state]


@dataclass(frozen=True)
class Waited:
    """What a rule is judged on: the report, and how long the run has waited for it."""

    report: CiReport
    seconds: float
    timeout: float
    grace: float


RULES: list[tuple[Callable[[Waited], bool], CiState]] = [
    (lambda w: not w.report.checks and w.seconds < min(w.grace, w.timeout), CiState.WAITING),
    (lambda w: not w.report.checks, CiState.NO_CI),
    (lambda w: bool(w.report.failing()) and (not w.report.pending() or w.seconds >= w.timeout), CiState.FAILED),
    (lambda w: bool(w.report.pending()) and w.seconds >= w.timeout, CiState.TIMED_OUT),
    (lambda w: bool(w.report.pending()), CiState.WAITING),
    (lambda w: True, CiState.PASSED),
]


def judge(report: CiReport, waited: float, *, timeout: float, grace: float = NO_CI_GRACE) -> CiVerdict:
    """The verdict on `report` after `waited` seconds of a wait bounded by `timeout`."""
    w = Waited(report, waited, timeout, grace)
    state = next(state for holds, state in RULES if holds(w))
    return CiVerdict(state, report.failing(), report.pending())


class Step(StrEnum):
    WAIT = "wait"  # poll again after poll_delay
    DONE = "done"  # green: the pull request waits for review (or merges)
    FIX = "fix"  # red: the failures go into the same run, the agent fixes, the engine pushes again
    GIVE_UP = "give_up"  # red or timed out with the rounds used up: the run ends quoting it, the PR stays open


def next_step(verdict: CiVerdict, pushes: int, ci_rounds: int) -> Step:
    """After this verdict on push number `pushes` of this CI cycle (1 = the first; a review
    round starts a new cycle): red before the last of `ci_rounds` pushes is fixed."""
    if verdict.state is CiState.WAITING:
        return Step.WAIT
    if verdict.green:
        return Step.DONE
    return Step.FIX if pushes < ci_rounds else Step.GIVE_UP


def poll_delay(waited: float) -> float:
    """Seconds to the next poll: often at first (checks start), then every 30 s."""
    return 10.0 if waited < 120 else 30.0


def failure_text(forge: Forge, verdict: CiVerdict, *, max_bytes: int = 16384) -> str:
    """What the failing checks say, for the next prompt: each Actions job's log (its end),
    or a check's summary and a status's description, with where to read the rest."""
    parts = []
    share = max(1024, max_bytes // max(1, len(verdict.failing)))
    for check in verdict.failing:
        said = check.summary
        if check.job_id is not None:
            try:
                said = forge.job_log(check.job_id, share)
            except ForgeError as e:  # the log may be gone (retention) or not readable: the summary stays
                said = f"{check.summary}\n(the job's log could not be read: {e})"
        parts.append(f"## {check.name} ({check.conclusion}): {check.url}\n{said.strip()}")
    return "\n\n".join(parts)
