"""Review rounds a run received (issue #41; pipeline/reviewing.py): the engine adds the
comments that steer to the run (`agent/reviews.jsonl` in its archive) before it reopens it;
the run, on its way back in, makes each new round a ledger step (`PR-REVIEW-<n>`, kind
`pr_review`), applied to the loop's state (state/prreview.py: a task quoting them) and to the
pull request's session (each comment acted on once), and replayed after any restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mp_engine.agent.run import answers
from mp_engine.agent.run.steps import AgentSteps
from mp_engine.agent.state.kinds import Effect, RecordKind
from mp_engine.agent.state.model import RunState
from mp_engine.core.atomic import append_durable
from mp_engine.core.clock import now_iso

FILE = "reviews.jsonl"  # in the run's agent/ directory


def add(run_dir: Path, *, number: int, url: str, keys: list[str], authors: list[str], text: str) -> int:
    """Record a review round in the run, durably, before the run is reopened; its number."""
    n = len(received(run_dir)) + 1
    entry = {"round": n, "number": number, "url": url, "keys": keys, "authors": authors, "text": text}
    path = run_dir / "agent" / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    append_durable(path, json.dumps({**entry, "at": now_iso()}, ensure_ascii=False))
    return n


def received(run_dir: Path) -> list[dict[str, Any]]:
    return answers.received(run_dir, FILE)


def take(state: RunState, steps: AgentSteps, run_dir: Path) -> list[Effect]:
    """Each review round the ledger has no step for yet: its `PR-REVIEW-<n>` step, applied."""
    entries = received(run_dir)
    return answers.take_each(state, steps, entries, "PR-REVIEW", RecordKind.PR_REVIEW, _said)


def _said(step_id: str, entry: dict[str, Any]) -> tuple[str, str]:
    return step_id, " ".join(entry["keys"])
