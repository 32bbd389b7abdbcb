"""Loopr's words for what the engine's loop is doing (issue #44): `status --json` carries

    "loop": {"state": "running" | "waiting" | "complete" | "blocked" | "error" | "circuit_open" | null,
             "next_reset_at": "2026-11-23T15:00:00Z" | null}

Loopr's `status.json` names the state of one loop; here the loop is the MP that runs now
or, with none running, the last one: its result says how it ended. `next_reset_at` is
when the limit a waiting run waits for resets (the hourly call limit, a provider's usage
or rate limit, a forge's rate limit): the `resume_at` the engine keeps. Pure: the state
and the last result in, the names out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mp_engine.record.stateview import StateView

# What a waiting run waits for that resets by itself at `resume_at`.
RESET_KINDS = frozenset({"rate_limit", "usage_limit", "forge_rate_limit"})
# Endings that ask a person (the certificates BLOCKED and NEED_INFO, a pause point).
ASKING = frozenset({"BLOCKED", "NEED_INFO"})


@dataclass(frozen=True)
class Seen:
    """What the names are decided from."""

    running: bool  # an MP is claimed (`run_id`)
    waiting: bool
    result: str | None  # the last result's status (COMPLETED, ERROR, ...)
    certificate: str | None  # its halting certificate's type (agent MPs)
    reason: str  # the certificate's reason


# Ordered: the first rule that holds names the state. None holding: null (no MP yet, or the
# last one was cancelled or superseded, which Loopr has no name for; `last_mp` says).
RULES: list[tuple[Callable[[Seen], bool], str]] = [
    (lambda s: s.running and s.waiting, "waiting"),
    (lambda s: s.running, "running"),
    (lambda s: s.result == "COMPLETED", "complete"),
    (lambda s: s.certificate == "DIVERGED" and s.reason.startswith(("breaker:", "residual_")), "circuit_open"),
    (lambda s: s.certificate in ASKING, "blocked"),
    (lambda s: s.result in ("ERROR", "REFUSED"), "error"),
]


def loop_state(state: StateView, last: dict[str, Any] | None) -> dict[str, Any]:
    """`loop` of `status --json`: Loopr's state name and `next_reset_at`. `last`: the last
    result's document (RESULT_last.json's layout), if any."""
    last = last or {}
    cert = last.get("certificate") if isinstance(last.get("certificate"), dict) else None
    waiting = state.waiting if isinstance(state.waiting, dict) else None
    seen = Seen(
        running=bool(state.run_id),
        waiting=waiting is not None,
        result=last.get("status") or (state.last_result or {}).get("status"),
        certificate=cert.get("type") if cert else None,
        reason=str(cert.get("reason") or "") if cert else "",
    )
    name = next((n for holds, n in RULES if holds(seen)), None)
    reset = waiting.get("resume_at") if waiting is not None and waiting.get("kind") in RESET_KINDS else None
    return {"state": name, "next_reset_at": reset}
