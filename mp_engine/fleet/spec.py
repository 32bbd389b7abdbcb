"""What travels through Temporal: an attempt (`AttemptSpec`, engine -> worker) and its
outcome (`AttemptResult`, worker -> engine). Plain dataclasses (Temporal's JSON converter
reads them); no agent level, argv or credential is in them: a worker runs the level of
that name from its own configuration.

Payloads carry the prompt, the MP's text and the outputs of the agent and the checks:
outputs are capped (tails) to stay well under Temporal's 2 MB payload limit; the whole
outputs stay in the worker's log of the attempt only as long as the attempt runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

WORKFLOW = "mp-engine-attempt"
ACTIVITY = "run_attempt"
OUTPUT_CAP = 256 * 1024  # bytes of the agent's stdout (tail) an outcome carries
CHECK_CAP = 64 * 1024  # bytes of each check's stdout and stderr (tail)
PAYLOAD_BUDGET = 1536 * 1024  # an outcome's outputs together: Temporal refuses payloads over 2 MB


def attempt_id(run_id: str, mt_id: str, iteration: int, run: int = 1) -> str:
    """The workflow id of an attempt: `mp-engine/<run>/<MT-id>/<iteration>`, and `.<n>`
    for the n-th run of an iteration the engine gave back (a usage limit, a stop). A
    restarted engine finds the one it started under the same id (docs/FLEET.md)."""
    base = f"mp-engine/{run_id}/{mt_id}/{iteration}"
    return base if run <= 1 else f"{base}.{run}"


def slug(text: str) -> str:
    """A file name for an attempt id."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._-")[:120] or "attempt"


@dataclass
class AttemptSpec:
    attempt_id: str
    mp_id: str
    run_id: str
    mt_id: str
    mt_index: int
    iteration: int
    level_name: str
    level_index: int
    step_id: str  # the iteration's ledger step (`MT-001_iter-002`): the checks' prefix
    idempotency_key: str
    prompt: str
    mp_text: str  # the MP as received: the worker runs its Validate checks
    accepting: list[int]  # the checks that accept the task (indices into the MP's checks)
    branch: str  # mp-task/<MP-id>/<MT-id> on the work remote
    commit: str  # the exact commit to work on (the task's worktree as the engine has it)
    budget: float  # seconds the MP has left: the call and the checks stay within it
    queue: str
    heartbeat_timeout: float
    max_tries: int


@dataclass
class CheckOutcome:
    index: int  # into the MP's checks
    step_id: str
    ok: bool
    exit_code: int | None
    artifact: dict[str, Any]  # the step's exit artifact, as the worker wrote it
    stdout: str = ""
    stderr: str = ""
    cancelled: bool = False


@dataclass
class AttemptResult:
    call: dict[str, Any]  # invoke.Call.to_dict()
    worker: str  # the worker's identity (`name@host`)
    tries: int  # which run of the activity this was (1: the first worker)
    stdout: str = ""
    stderr: str = ""
    stdout_omitted: int = 0  # bytes of the head left out
    checks: list[CheckOutcome] = field(default_factory=list)
    checks_interrupted: bool = False
    commit: str = ""  # the worker's work, pushed to `branch` (the spec's commit when nothing changed)
    protected: list[str] = field(
        default_factory=list
    )  # files that judge the work the call changed, restored (issue #42)
    started_at: str = ""
    ended_at: str = ""

    def fit(self) -> AttemptResult:
        """Within PAYLOAD_BUDGET: many checks with long outputs keep their last 4 KiB each."""
        size = len(self.stdout) + len(self.stderr) + sum(len(c.stdout) + len(c.stderr) for c in self.checks)
        if size > PAYLOAD_BUDGET:
            for c in self.checks:
                c.stdout, c.stderr = c.stdout[-4096:], c.stderr[-4096:]
        return self
