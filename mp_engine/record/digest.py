"""The result in the form a program (or a model) reads in one fetch (issue #14):

  - `SYSTEM/RESULT_last.json`: the last result, a small versioned document (schema below,
    documented in docs/PROTOCOL.md §7), beside RESULT_last.md;
  - `SYSTEM/results.jsonl`: one line per finished MP, append-only, so the whole history is
    one file read; rotated to `SYSTEM/results.1.jsonl` past `INDEX_MAX_BYTES`.

Both are written by `finalize` before the result commit, atomically (the index: one
appended line, never a duplicate: finalize may run twice for one run after a crash).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mp_engine import __version__
from mp_engine.core.atomic import append_durable, atomic_write, read_tail
from mp_engine.core.workspace import RUNS_DIR, SYSTEM_DIR, Workspace
from mp_engine.record.diagnosis import REFUSED_KIND
from mp_engine.record.outcome import ERROR, Outcome, StepReport

SCHEMA = "mp-engine/result/1"
# The versions MP-1.3's own VERSION section gives (its "Protocol Version" and "Specification
# Version"): what every result says it implements (issue #44).
PROTOCOL_VERSION = "v1.0"
SPECIFICATION = "MP-1.3"
LAST_JSON = "RESULT_last.json"
INDEX = "results.jsonl"
INDEX_ROTATED = "results.1.jsonl"
INDEX_MAX_BYTES = 1024 * 1024
TAIL_CHARS = 2000  # of each output, in RESULT_last.json (the archive holds the whole)


def public_status(o: Outcome) -> str:
    """COMPLETED, ERROR, SUPERSEDED, CANCELLED, or REFUSED (an MP refused before anything
    ran: invalid, or unsigned): what an orchestrator branches on."""
    if o.status == ERROR and o.diagnosis is not None and o.diagnosis.kind == REFUSED_KIND:
        return "REFUSED"
    return o.status


def _tail(text: str) -> str:
    return text if len(text) <= TAIL_CHARS else "[...]" + text[-TAIL_CHARS:]


def _step(r: StepReport, run_rel: str) -> dict[str, Any]:
    return {
        "id": r.step_id,
        "kind": r.kind,
        "what": r.what,
        "line": r.line,
        "status": r.status,
        "exit_code": r.exit_code,
        "duration": None if r.duration is None else round(r.duration, 3),
        "attempts": r.attempts,
        "stdout_tail": _tail(r.stdout),
        "stderr_tail": _tail(r.stderr),
        "stdout_path": f"{run_rel}/{r.stdout_ref}" if r.stdout_ref else None,
        "stderr_path": f"{run_rel}/{r.stderr_ref}" if r.stderr_ref else None,
    }


def document(o: Outcome, ws: Workspace) -> dict[str, Any]:
    """RESULT_last.json's content for outcome `o`, and the run archive's result.json."""
    return _document(o, ws.rel(ws.runs_dir / o.run_id))


def _document(o: Outcome, run_rel: str) -> dict[str, Any]:
    d = o.diagnosis
    return {
        "schema": SCHEMA,
        "specification": SPECIFICATION,
        "protocol_version": PROTOCOL_VERSION,
        "engine_version": __version__,
        "mp_id": o.mp_id,
        "mp_sha256": o.mp_sha256,
        "title": o.title,
        "status": public_status(o),
        "run_id": o.run_id,
        "archive": f"{run_rel}/",
        "executor": o.executor,
        "started_at": o.started_at,
        "finished_at": o.finished_at,
        "duration": round(o.duration, 3),
        "certificate": o.extra.get("certificate"),
        "steps": [_step(r, run_rel) for r in o.steps],
        "checks": [_step(r, run_rel) for r in o.checks],
        "diagnosis": None
        if d is None
        else {"kind": d.kind, "summary": d.summary, "text": d.diagnosis, "step_id": d.step_id, "line": d.line},
        "fix": d.fix if d else None,
        "approve_with": f"Approves: {o.halt_token}" if o.halt_token and o.status == ERROR else None,
        "commit_subject": o.commit_summary,
        "work": o.extra.get("work"),
        "micro_tasks": (o.extra.get("agent") or {}).get("micro_tasks"),
        "replans": (o.extra.get("agent") or {}).get("replans"),
        "drift_checks": (o.extra.get("agent") or {}).get("drift_checks"),
        "usage": o.extra.get("usage"),
        "sandbox": o.extra.get("sandbox"),
        "memory": (o.extra.get("agent") or {}).get("memory"),  # which SYSTEM/memory.md its prompts carried
        "lessons": o.extra.get("lessons"),  # what it added to SYSTEM/memory.md
        "suggestion": o.extra.get("suggestion"),  # [diagnose] level's opinion: not verified
        "answerable": o.extra.get("answerable"),  # an agent MP that asked: {"mt", "question"}
        "review": o.extra.get("review"),  # `[agent.reviewer]`'s verdicts (issue #42)
        "pull_request": o.extra.get("pull_request"),  # `Repo:` (issue #41): where the work is, its pull request, CI
        "protected": o.extra.get("protected"),  # issue #42: files that judge the work the agent changed, restored
        "budget": o.extra.get("budget"),  # issue #42: the engine's budgets as the run ended
        "notes": o.notes,
    }


def read_result(run_dir: Path) -> dict[str, Any] | None:
    """A run's result.json as the document above, also when an older engine wrote it: its
    archive held the outcome itself (executor sections under `extra`, whole outputs),
    converted here so that every reader reads one layout (issue #44). None: no result."""
    try:
        raw = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict):
        return None
    if str(raw.get("schema", "")).startswith("mp-engine/result/"):
        return raw
    try:
        # An older engine wrote it, which one is not recorded: not this version.
        return {**_document(Outcome.from_dict(raw), f"{SYSTEM_DIR}/{RUNS_DIR}/{run_dir.name}"), "engine_version": None}
    except (TypeError, KeyError, AttributeError):  # not an outcome either: what can be read of it
        return {k: raw.get(k) for k in ("mp_id", "title", "status", "run_id", "duration", "started_at", "finished_at")}


def index_line(o: Outcome) -> dict[str, Any]:
    return {
        "mp_id": o.mp_id,
        "mp_sha256": o.mp_sha256,
        "status": public_status(o),
        "finished_at": o.finished_at,
        "run_id": o.run_id,
        "summary": o.diagnosis.summary if o.diagnosis else None,
    }


def write_digest(ws: Workspace, o: Outcome, redact=lambda s: s) -> list[Path]:
    """The run's line appended to results.jsonl (once), without fsync: the path is returned
    for the caller's one round of fsyncs. (RESULT_last.json is the run's result.json,
    linked by `result.write_result`.)"""
    index = ws.system_dir / INDEX
    # Not twice after a crash mid-finalize: the line would be the last one. (A run a person
    # answered ends again, later: a line of its own.)
    line = redact(json.dumps(index_line(o), ensure_ascii=False))
    if line not in read_tail(index, max(4096, 2 * len(line))):
        _rotate(index, len(line) + 1)
        append_durable(index, line, durable=False)
    return [index]


def write_last(ws: Workspace, o: Outcome, redact=lambda s: s, *, durable: bool = True) -> Path:
    """Replace RESULT_last.json with outcome `o`'s document; return its path."""
    last = ws.system_dir / LAST_JSON
    atomic_write(last, redact(json.dumps(document(o, ws), indent=1, ensure_ascii=False)) + "\n", durable=durable)
    return last


def _rotate(index: Path, incoming: int) -> None:
    try:
        size = index.stat().st_size
    except FileNotFoundError:
        return
    if size + incoming > INDEX_MAX_BYTES:
        os.replace(index, index.with_name(INDEX_ROTATED))


def read_index(ws: Workspace) -> list[dict[str, Any]]:
    """Every line of the index, oldest first (the rotated file, then the current one)."""
    out = []
    for name in (INDEX_ROTATED, INDEX):
        try:
            text = (ws.system_dir / name).read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        for line in text.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out
