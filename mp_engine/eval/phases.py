"""What to do next for one task under one configuration, decided from facts alone (what the
eval directory holds), as a table of rules: the same facts after a crash give the same step,
so a resumed eval goes on where the killed one stopped, judging nothing twice (issue #43)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

MAX_FAILED_RUNS = 2  # `once` runs that ended with no result, not stopped by us: the engine failed


class Phase(StrEnum):
    DONE = "done"  # judged: a line in results.jsonl
    STOP = "stop"  # the eval is stopping: start nothing more
    PROBE = "probe"  # the task's environment is not probed yet (shared by every configuration)
    SKIP_ENV = "skip_env"  # the probe failed: record env_error, run no agent
    JUDGE = "judge"  # the run has its result: judge the work
    GIVE_UP = "give_up"  # `once` failed to produce a result, again: record error
    RUN = "run"  # the workspace is ready (or holds an interrupted run): `mp-engine once`
    PREPARE = "prepare"  # make the workspace and drop the MP


@dataclass(frozen=True)
class Facts:
    judged: bool = False
    stopping: bool = False
    probed: bool = False
    probe_ok: bool = False
    has_result: bool = False
    failed_runs: int = 0
    prepared: bool = False


RULES: tuple[tuple[Callable[[Facts], bool], Phase], ...] = (
    (lambda f: f.judged, Phase.DONE),
    (lambda f: f.stopping, Phase.STOP),
    (lambda f: not f.probed, Phase.PROBE),
    (lambda f: not f.probe_ok, Phase.SKIP_ENV),
    (lambda f: f.has_result, Phase.JUDGE),
    (lambda f: f.failed_runs >= MAX_FAILED_RUNS, Phase.GIVE_UP),
    (lambda f: f.prepared, Phase.RUN),
    (lambda f: True, Phase.PREPARE),
)


def next_phase(facts: Facts) -> Phase:
    return next(phase for rule, phase in RULES if rule(facts))


def pending(pairs: Sequence[tuple[str, str]], judged: Callable[[str, str], bool]) -> list[tuple[str, str]]:
    """The (configuration, task) pairs not judged yet, in order: each task under every
    configuration before the next task, so that a stopped comparison stays paired."""
    return [(c, t) for c, t in pairs if not judged(c, t)]


def pairs(configs: Sequence[str], tasks: Sequence[str]) -> list[tuple[str, str]]:
    return [(c, t) for t in tasks for c in configs]
