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

Output that is neither shape is not structured: the text rules apply (classify.py,
echo.py).

What a call cost (issue #32) comes from the same fields: claude's result has `usage`
(`input_tokens`, `output_tokens`, `cache_read_input_tokens`,
`cache_creation_input_tokens`) and `total_cost_usd`; codex's `turn.completed` events each
have `usage` (`input_tokens`, `cached_input_tokens`, `output_tokens`), summed; aider prints
`Tokens: 2.3k sent, 120 received. Cost: $0.01 message, $0.02 session.` per message
(`text_usage`). A usage is `{"input", "output", "cache_read", "cache_write", "cost_usd"}`
(tokens; dollars, or None when the CLI does not say).
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
    usage: dict[str, Any] | None = None  # what the call cost, when the CLI says (module docstring)
    environment: str | None = None  # every command failed for a reason outside the task (`_environment`)
    turns: int | None = None  # model turns the call took, as the CLI counted them (claude's `num_turns`)
    turn_limit: bool = False  # the CLI stopped at its turn limit (claude's `error_max_turns`)


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
    used = u if isinstance(u := result.get("usage"), dict) else {}
    cost = result.get("total_cost_usd")
    turns = result.get("num_turns")
    return Structured(
        answer=answer,
        is_error=is_error,
        api_status=status if isinstance(status, int) else None,
        resets_at=resets_at,
        error=answer if is_error else "",
        usage=_usage(
            used.get("input_tokens"),
            used.get("output_tokens"),
            used.get("cache_read_input_tokens"),
            used.get("cache_creation_input_tokens"),
            cost if isinstance(cost, int | float) else None,
        )
        if used or cost is not None
        else None,
        turns=turns if isinstance(turns, int) else None,
        # claude 2.1: `"subtype": "error_max_turns"`, `"terminal_reason": "max_turns"`, exit 1.
        turn_limit=result.get("subtype") == "error_max_turns" or result.get("terminal_reason") == "max_turns",
    )


def _codex(objs: list[dict[str, Any]], now: datetime) -> Structured:
    said: list[str] = []
    failure = ""
    completed = False
    resets_at = None
    turns: list[dict[str, Any]] = []
    for obj in objs:
        kind = obj.get("type")
        item = i if isinstance(i := obj.get("item"), dict) else {}
        if kind == "item.completed" and item.get("type") == "agent_message":
            said.append(str(item.get("text") or ""))
        elif kind == "turn.completed":
            completed = True
            if isinstance(obj.get("usage"), dict):
                turns.append(obj["usage"])
        elif kind in ("turn.failed", "error"):
            err = e if isinstance(e := obj.get("error"), dict) else obj
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
        usage=_usage(
            sum(_int(t.get("input_tokens")) for t in turns),
            sum(_int(t.get("output_tokens")) for t in turns),
            sum(_int(t.get("cached_input_tokens")) for t in turns),
            0,
            None,
        )
        if turns
        else None,
        environment=_environment(objs),
    )


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and value >= 0 else 0


def _usage(inp: Any, out: Any, cache_read: Any, cache_write: Any, cost: float | None) -> dict[str, Any]:
    return {
        "input": _int(inp),
        "output": _int(out),
        "cache_read": _int(cache_read),
        "cache_write": _int(cache_write),
        "cost_usd": round(float(cost), 6) if cost is not None else None,
    }


# aider (base_coder.py): "Tokens: 2.3k sent, 1.1k cache write, 800 cache hit, 120 received." then
# " Cost: $0.01 message, $0.02 session." (on the next line when both cache counts show)
AIDER_RE = re.compile(
    r"^Tokens: ([\d.]+)(k?) sent,(?: ([\d.]+)(k?) cache write,)?(?: ([\d.]+)(k?) cache hit,)? ([\d.]+)(k?) received\."
    r"(?:\s+Cost: \$([\d.]+) message)?",
    re.M,
)


def text_usage(text: str) -> dict[str, Any] | None:
    """aider's per-message `Tokens: ... Cost: ...` lines, summed; None without one."""

    def n(value: str | None, k: str | None) -> float:
        return float(value) * (1000 if k else 1) if value else 0.0

    found = list(AIDER_RE.finditer(text))
    if not found:
        return None
    costs = [float(m.group(9)) for m in found if m.group(9)]
    return _usage(
        round(sum(n(m.group(1), m.group(2)) for m in found)),
        round(sum(n(m.group(7), m.group(8)) for m in found)),
        round(sum(n(m.group(5), m.group(6)) for m in found)),
        round(sum(n(m.group(3), m.group(4)) for m in found)),
        sum(costs) if costs else None,
    )


def _reset(event: dict[str, Any], now: datetime | None = None) -> str | None:
    """When a limit resets, from `resetsAt`/`resets_at` (epoch seconds or ISO) or
    `resets_in_seconds`, as ISO UTC."""
    info = i if isinstance(i := event.get("rate_limit_info"), dict) else event
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


# A command that could not run for a reason outside the task: the CLI's own command
# sandbox could not start (codex: "bwrap: execvp codex-linux-sandbox: No such file or
# directory", "bwrap: No permissions to create new namespace"), or its helper is missing.
ENVIRONMENT_RE = re.compile(
    r"^bwrap: .+|\bcodex-linux-sandbox\b.*(?:No such file|not found|failed|denied)|"
    r"\bLandlock\b.*(?:not supported|failed)|\bsandbox(?:ing)? (?:is )?(?:not available|failed to start|denied)",
    re.I | re.M,
)


def _environment(objs: list[dict[str, Any]]) -> str | None:
    """When every command the agent ran in this call failed for a reason outside the task
    (codex's `command_execution` items: each a non-zero exit whose output is such an
    error), that error's first line; else None. The breaker the failures lead to then
    names the cause (issue #34), not only "no progress"."""
    ran = [
        o["item"]
        for o in objs
        if o.get("type") == "item.completed"
        and isinstance(o.get("item"), dict)
        and o["item"].get("type") == "command_execution"
    ]
    if not ran:
        return None
    found = []
    for item in ran:
        m = ENVIRONMENT_RE.search(str(item.get("aggregated_output") or ""))
        if item.get("exit_code") in (0, None) or m is None:
            return None
        found.append(m.group(0).strip()[:300])
    return found[0]
