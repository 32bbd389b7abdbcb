"""The agent run's ledger steps: an iteration (`MT-001_iter-002`, kind `agent`), a
planning round (`PLAN-1_iter-001`, kind `plan`) or a drift check (`DRIFT-1`, kind
`drift`), each keyed by the SHA-256 of what identifies it (an iteration's: MT id,
iteration, level, prompt hash), so a step that finished is never run again.

Per-iteration writes skip fsync; `checkpoint` makes a finished step durable at once
(one fsync, not one per file): a power loss costs at most the step that was running,
whose prompt `prompt_once` kept, so it runs again with the same key.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mp_engine.agent.evidence import IterationEvidence
from mp_engine.core.pids import proc_stat
from mp_engine.record.ledger import Ledger, LedgerStep, StepStatus, idempotency_key, write_artifact


def iteration_step(mt_id: str, iteration: int) -> str:
    """The ledger step of an iteration: `MT-001_iter-002`."""
    return f"{mt_id}_iter-{iteration:03d}"


class AgentSteps:
    def __init__(self, ledger: Ledger, steps_dir: Path):
        self.ledger = ledger
        self.steps_dir = steps_dir

    def start(self, step_id: str, kind: str, *key_parts: str) -> LedgerStep:
        """Start ledger step `step_id`, keyed by the SHA-256 of `key_parts`."""
        key = idempotency_key(*key_parts)
        step = self.ledger.ensure_step(step_id, kind, key)
        step.idempotency_key = key
        self.ledger.start(step)
        return step

    def prompt_once(self, ev: IterationEvidence, step_id: str, build: Callable[[], str]) -> str:
        """The step's prompt: built and kept in its evidence the first time, the kept one on
        a retry (the same prompt, so the same idempotency key)."""
        path = ev.path("prompt.md")
        if self.ledger.step(step_id) is not None and path.exists():
            text = path.read_text(encoding="utf-8")
            ev.add(path, text.encode("utf-8"))
            return text
        text = build()
        ev.write("prompt.md", text)
        return text

    def on_spawn(self, step: LedgerStep) -> Callable[[int], None]:
        """What a call does once its process exists: record the group (recovery kills it)."""

        def spawned(pid: int) -> None:
            info = proc_stat(pid)
            self.ledger.spawned(step, pid, info[1] if info else None)

        return spawned

    def finish(self, step: LedgerStep, record: dict[str, Any], *, ok: bool, error: str | None = None) -> None:
        """The step's artifact is its record; the ledger says it finished, durably."""
        ref = write_artifact(self.steps_dir, step, record, durable=False)
        self.ledger.finish(step, ok=ok, output_ref=ref, error=error)
        self.checkpoint()

    def release(self, step: LedgerStep) -> None:
        """Put a started step back to pending: it runs again, with the same prompt."""
        step.status = StepStatus.PENDING
        step.pgid = step.proc_start = None
        self.ledger.save()

    def checkpoint(self) -> None:
        """Make the ledger durable: its deferred transitions as journal lines, one fsync.
        Everything else of the step (record, evidence, events) is written without fsync:
        it survives `kill -9`."""
        self.ledger.flush(durable=True)
