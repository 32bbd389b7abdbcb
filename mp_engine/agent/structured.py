"""A CLI's structured output, where it has one (issue #16): read what the agent said and
how the call failed from fields, not from text patterns.

`claude -p --output-format json` prints one JSON object at the end; `--output-format
stream-json --verbose` prints one per line, the last being the same `{"type": "result"}`:

    {"type": "result", "is_error": true, "api_error_status": 401,
     "result": "Invalid API key · Fix external API key", ...}

`result` is the agent's final answer (its status block and claims are read there, so a
JSON-escaped block still parses); `api_error_status` is the HTTP status of the API call
that failed; a `rate_limit_event` line may say when a limit resets. Output that is not
this shape is not structured: the text rules apply (invoke.classify, echo.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class Structured:
    answer: str  # the agent's final text
    is_error: bool
    api_status: int | None  # HTTP status of the failed API call
    resets_at: str | None  # ISO UTC, when a rate or usage limit said so


def parse(stdout: str) -> Structured | None:
    """The result of a claude-style JSON (or JSON lines) output, or None."""
    result: dict[str, Any] | None = None
    resets_at = None
    for line in stdout.strip().splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        if obj.get("type") == "result" and isinstance(obj.get("result", ""), str):
            result = obj
        elif obj.get("type") == "rate_limit_event":
            resets_at = _reset(obj) or resets_at
    if result is None:
        return None
    status = result.get("api_error_status")
    return Structured(
        answer=str(result.get("result") or ""),
        is_error=bool(result.get("is_error")),
        api_status=status if isinstance(status, int) else None,
        resets_at=resets_at,
    )


def _reset(event: dict[str, Any]) -> str | None:
    """`resetsAt` of a rate_limit_event (epoch seconds or ISO), as ISO UTC."""
    info = event.get("rate_limit_info") if isinstance(event.get("rate_limit_info"), dict) else event
    raw = info.get("resetsAt") or info.get("resets_at")
    try:
        when = datetime.fromtimestamp(float(raw), UTC) if isinstance(raw, int | float) else None
        if when is None and isinstance(raw, str):
            when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        return None
    if when is None:
        return None
    return when.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
