"""A CLI's structured output, where it has one (issue #16): read what the agent said and
how the call failed from fields, not from text patterns.

`claude -p --output-format json` prints one JSON object at the end; `--output-format
stream-json --verbose` prints one per line, the last being the same `{"type": "result"}`:

    {"type": "result", "is_error": true, "api_error_status": 401,
     "result": "Invalid API key · Fix external API key", ...}

`result` is the agent's final answer (its status block and claims are read there, so a
JSON-escaped block still parses); `api_error_status` is the HTTP status of the API call
that failed; a `rate_limit_event` line may say when a limit resets.

`codex exec --json` prints JSON lines (codex-rs/exec/src/exec_events.rs): the agent's
messages are `item.completed` items of type `agent_message`; a turn ends `turn.completed`,
or `turn.failed` with `error.message`, the CLI's own error ("unexpected status 401
Unauthorized: ...", "You've hit your usage limit ... try again at 6:06 PM."). The prompt
is not echoed in this mode.

Output that is neither shape is not structured: the text rules apply (invoke.classify,
echo.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

# codex: "unexpected status 401 Unauthorized: ...", "exceeded retry limit, last status: 429 ..."
STATUS_RE = re.compile(r"\b(?:unexpected|last) status:? (\d{3})\b")


@dataclass(frozen=True)
class Structured:
    answer: str  # the agent's own text: where its claims are read
    is_error: bool
    api_status: int | None  # HTTP status of the failed API call
    resets_at: str | None  # ISO UTC, when a rate or usage limit said so
    error: str = ""  # the CLI's own error message when the call failed: where limits are read


def parse(stdout: str, now: datetime | None = None) -> Structured | None:
    """The result of a claude-style JSON or a codex-style JSON-lines output, or None."""
    objs = list(_objects(stdout))
    if any(o.get("type") == "result" for o in objs):
        return _claude(objs)
    if any(o.get("type") in ("thread.started", "turn.completed", "turn.failed") for o in objs):
        return _codex(objs, now or datetime.now(UTC))
    return None


def _objects(stdout: str) -> Iterator[dict[str, Any]]:
    for line in stdout.strip().splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


def _claude(objs: list[dict[str, Any]]) -> Structured | None:
    result: dict[str, Any] | None = None
    resets_at = None
    for obj in objs:
        if obj.get("type") == "result" and isinstance(obj.get("result", ""), str):
            result = obj
        elif obj.get("type") == "rate_limit_event":
            resets_at = _reset(obj) or resets_at
    if result is None:
        return None
    status = result.get("api_error_status")
    answer = str(result.get("result") or "")
    is_error = bool(result.get("is_error"))
    return Structured(
        answer=answer,
        is_error=is_error,
        api_status=status if isinstance(status, int) else None,
        resets_at=resets_at,
        error=answer if is_error else "",
    )


def _codex(objs: list[dict[str, Any]], now: datetime) -> Structured:
    said: list[str] = []
    failure = ""
    completed = False
    resets_at = None
    for obj in objs:
        kind = obj.get("type")
        item = obj.get("item") if isinstance(obj.get("item"), dict) else {}
        if kind == "item.completed" and item.get("type") == "agent_message":
            said.append(str(item.get("text") or ""))
        elif kind == "turn.completed":
            completed = True
        elif kind in ("turn.failed", "error"):
            err = obj.get("error") if isinstance(obj.get("error"), dict) else obj
            failure = str(err.get("message") or failure)
            resets_at = _reset(err, now) or resets_at
    status = STATUS_RE.search(failure)
    is_error = bool(failure) and not completed
    return Structured(
        answer="\n".join(said),
        is_error=is_error,
        api_status=int(status.group(1)) if status and is_error else None,
        resets_at=resets_at if is_error else None,
        error=failure if is_error else "",
    )


def _reset(event: dict[str, Any], now: datetime | None = None) -> str | None:
    """When a limit resets, from `resetsAt`/`resets_at` (epoch seconds or ISO) or
    `resets_in_seconds`, as ISO UTC."""
    info = event.get("rate_limit_info") if isinstance(event.get("rate_limit_info"), dict) else event
    raw = info.get("resetsAt") or info.get("resets_at")
    seconds = info.get("resets_in_seconds")
    try:
        when = datetime.fromtimestamp(float(raw), UTC) if isinstance(raw, int | float) else None
        if when is None and isinstance(raw, str):
            when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        if when is None and isinstance(seconds, int | float) and now is not None:
            when = now + timedelta(seconds=float(seconds))
    except (ValueError, OverflowError, OSError):
        return None
    if when is None:
        return None
    return when.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
