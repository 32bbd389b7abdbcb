"""A diagnosis: the root-cause class of a failure, a sentence, and exactly one fix.

MP-1.3 asks for a diagnosis and exactly one proposed fix on every error; every result
carries one. How a failed step is classified is execute/diagnosis.py.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Diagnosis:
    kind: str  # machine-readable class, e.g. "command_not_found"
    summary: str  # a few words for commit messages: "timeout in step 2"
    diagnosis: str  # the root cause, in a sentence or two
    fix: str  # exactly one proposed fix
    step_id: str | None = None
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Diagnosis:
        # Read from JSON: a field the file lacks is None, as it always was.
        fields: dict[str, Any] = {k: data.get(k) for k in cls.__dataclass_fields__}
        return cls(**fields)


# The kind of an MP refused before anything ran (invalid, unsigned): an ERROR result, but
# no halt, since nothing ran that could need a person's look (REFUSED in RESULT_last.json).
REFUSED_KIND = "invalid_mp"


def invalid_mp(reason: str, fix: str, line: int | None = None) -> Diagnosis:
    return Diagnosis(REFUSED_KIND, "invalid MP", f"The MP was refused before anything ran: {reason}.", fix, None, line)


def engine_error(exc: BaseException) -> Diagnosis:
    return Diagnosis(
        "engine_error",
        "internal engine error",
        f"mp-engine itself failed: {type(exc).__name__}: {exc}.",
        "Report this as an mp-engine bug with SYSTEM/.engine/events.jsonl and the run archive attached.",
    )


def disk_full(where: str, exc: BaseException) -> Diagnosis:
    """The engine could not record the run: the disk (or quota) is full."""
    return Diagnosis(
        "disk_full",
        f"no space left on {where.split(' ')[0]}",
        f"The disk filled while the MP ran, so the engine could not record it: no space left on {where} "
        f"({type(exc).__name__}: {exc}). The step that ran out of space is not run again by itself.",
        "Free space on that file system (old runs are in SYSTEM/runs/), then send the MP again with "
        "an `Approves:` header naming this one.",
    )
