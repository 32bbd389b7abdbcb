"""Answers a run received (issue #32; inbox/answer.py): the engine adds each one to the run
(`agent/answers.jsonl` in its archive) before it reopens it; the run, on its way back in,
makes each new one a ledger step (`ANSWER-<n>`, kind `answer`), applied to the loop's
state in order (state/answer.py) and replayed after any restart."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mp_engine.agent.run.steps import AgentSteps
from mp_engine.agent.state.apply import apply
from mp_engine.agent.state.kinds import Effect, RecordKind
from mp_engine.agent.state.model import RunState
from mp_engine.core.atomic import append_durable
from mp_engine.core.clock import now_iso

FILE = "answers.jsonl"  # in the run's agent/ directory


def add(run_dir: Path, *, mt: str, question: str, answer: str, source: str) -> None:
    """Record an answer in the run, durably, before the run is reopened."""
    path = run_dir / "agent" / FILE
    entry = {"mt": mt, "question": question, "answer": answer, "source": source, "at": now_iso()}
    append_durable(path, json.dumps(entry, ensure_ascii=False))


def received(run_dir: Path, name: str = FILE) -> list[dict[str, Any]]:
    """The entries of `agent/<name>` in the run (answers here; review rounds: reviews.py)."""
    try:
        lines = (run_dir / "agent" / name).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def take(state: RunState, steps: AgentSteps, run_dir: Path) -> list[Effect]:
    """Each answer the ledger has no step for yet: its `ANSWER-<n>` step, applied."""
    return take_each(state, steps, received(run_dir), "ANSWER", RecordKind.ANSWER, lambda _, e: (e["mt"], e["answer"]))


def take_each(
    state: RunState,
    steps: AgentSteps,
    entries: list[dict[str, Any]],
    prefix: str,
    kind: RecordKind,
    said: Callable[[str, dict[str, Any]], tuple[str, str]],
) -> list[Effect]:
    """Each entry the ledger has no completed `<prefix>-<n>` step for yet: that step (kind
    `kind`, its target and text from `said(step_id, entry)`), finished and applied to `state` in order."""
    effects: list[Effect] = []
    for n, entry in enumerate(entries, 1):
        step_id = f"{prefix}-{n}"
        done = steps.ledger.step(step_id)
        if done is not None and done.status.value == "completed":
            continue
        step = steps.start(step_id, kind.value, *said(step_id, entry))
        rec = {**entry, "ok": True, "seq": state.applied + 1}
        steps.finish(step, rec, ok=True)
        effects += apply(state, kind, rec)
    return effects
