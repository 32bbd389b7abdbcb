"""Which events are worth an alert, and what the alert says: what happened, for which MP,
and the one command that acts on it. Pure: an event record in, an `Alert` (or None) out.

    halted                       halt     (blocked, when the MP ended asking a person)
    mp_failed                    error
    mp_completed                 completed
    mp_cancelled                 cancelled
    engine_stopped, engine_stalled  engine_down
    sync_push_refused            push_refused
    campaign_drift_check         drift    (only when it found drift: the campaign's notification)
    budget_spent                 budget   (once per day or month: the engine's spend log says)
"""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass, field
from typing import Any

# An MP that ended asking a person (a task said it is blocked, the hard gate, NEED_INFO, a
# plan that waits for approval):
# its halt is a question, not a failure.
BLOCKED_KINDS = frozenset({"agent_blocked", "agent_hard_gate", "agent_need_info", "agent_plan_review"})


@dataclass
class Alert:
    kind: str  # one of config.ALERT_KINDS
    title: str
    body: str
    act: str  # the one command (or header) that acts on it; "" when nothing needs doing
    mp: str | None
    event: dict[str, Any]
    host: str = field(default_factory=socket.gethostname)
    root: str = ""
    id: str = ""  # set by the outbox

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Alert:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def text(self) -> str:
        """The message body as a person reads it (Apprise's body)."""
        return self.body + (f"\n\nTo act: {self.act}" if self.act else "") + f"\n\n({self.host}: {self.root})"


class Rules:
    """Turns the engine's events into alerts; remembers each failed MP's diagnosis until
    its `halted` event says whether it halts."""

    def __init__(self, root: str, on: tuple[str, ...]):
        self.root = root
        self.on = set(on)
        self._failed: dict[str, dict[str, Any]] = {}

    def alert(self, e: dict[str, Any]) -> Alert | None:
        a = self._make(e)
        if a is None or a.kind not in self.on:
            return None
        a.root = self.root
        return a

    def _make(self, e: dict[str, Any]) -> Alert | None:
        """The alert event `e` makes, or None. Long because it is the list of the events that
        are alerts, each with the words a person reads."""
        name, mp = e.get("event"), e.get("mp")
        root = f"--root {self.root}"
        if name == "mp_failed":
            self._failed[str(mp)] = e
            return Alert(
                "error",
                f"mp-engine: {mp} ended in ERROR",
                f"{mp}: {e.get('summary')}.\nFix: {e.get('fix')}",
                f"send the fixed MP with the header `Approves: {mp}`",
                mp,
                e,
            )
        if name == "halted":
            failed = self._failed.pop(str(mp), {})
            approve = f"an MP with the header `{e.get('approve_with')}`, or `mp-engine approve {root}` on the host"
            if failed.get("kind") in BLOCKED_KINDS:
                answer = (
                    f"answer it: `mp-engine answer {mp} 'TEXT' {root}` on the host, or `mp-engine send --answer {mp} "
                    f"FILE --repo URL` (the same run goes on)"
                )
                return Alert(
                    "blocked",
                    f"mp-engine: {mp} is waiting for an answer",
                    f"{mp} asks a person: {failed.get('summary')}.\n{failed.get('fix') or ''}".rstrip(),
                    answer if failed.get("kind") != "agent_need_info" else approve,
                    mp,
                    e,
                )
            why = f"{failed.get('summary')}.\nFix: {failed.get('fix')}" if failed else "it failed"
            return Alert(
                "halt",
                f"mp-engine halted on {mp}",
                f"The engine takes no MP until {mp} is approved: {why}",
                approve,
                mp,
                e,
            )
        if name == "mp_completed":
            return Alert(
                "completed", f"mp-engine: {mp} completed", f"{mp} completed in {e.get('duration')} s.", "", mp, e
            )
        if name == "mp_cancelled":
            return Alert(
                "cancelled", f"mp-engine: {mp} cancelled", f"{mp} was cancelled ({e.get('source')}).", "", mp, e
            )
        if name in ("engine_stopped", "engine_stalled") and e.get("mode") != "once":  # once always ends
            why = "stopped" if name == "engine_stopped" else f"stalled and exits for a restart: {e.get('detail')}"
            return Alert(
                "engine_down",
                "mp-engine is down",
                f"The engine on this host {why}.",
                f"`systemctl start mp-engine` (or `mp-engine run {root}`)",
                None,
                e,
            )
        if name == "campaign_drift_check" and e.get("drift"):
            return drift(e, mp, root)
        if name == "budget_spent":  # issue #42: sent once per period (record/spend.py)
            waits = "agent calls wait until" if e.get("on_budget") == "wait" else "agent MPs end until"
            return Alert(
                "budget",
                f"mp-engine: the {e.get('period')}'s agent budget is spent",
                f"Every MP's agent calls cost ${e.get('spent_usd')} this {e.get('period')} ({e.get('key')}), the "
                f"budget is ${e.get('limit_usd')}: {waits} {e.get('resets_at')}.",
                f"wait for the reset, or raise `[agent] {'daily' if e.get('period') == 'day' else 'monthly'}_cost_usd`",
                mp,
                e,
            )
        if name == "sync_push_refused":
            return Alert(
                "push_refused",
                "mp-engine: the remote refuses its pushes",
                f"The channel remote refused the engine's push for good: {e.get('message')}",
                f"`mp-engine doctor {root}` names the fix; results stay committed on the host until then",
                None,
                e,
            )
        return None


def drift(e: dict[str, Any], mp: str | None, root: str) -> Alert:
    """A drift check that found drift (issue #44: the campaign notifies a person, "Campaign
    drifted from goal. Re-planning..."): what it found; the engine re-plans by itself, or
    the MP ends DIVERGED and its halt is an alert of its own."""
    found = [f"{', '.join(e.get('regressed') or [])} regressed"] if e.get("regressed") else []
    if e.get("reflector") == "drifted":
        found.append(f"the reflector says the work drifted: {e.get('why') or '(no reason given)'}")
    return Alert(
        "drift",
        f"mp-engine: {mp} drifted from its goal",
        f"The drift check at {e.get('at')} % of {mp}'s tasks found drift: {'; '.join(found) or 'drift'}. "
        "The engine re-plans while `[agent] max_replans` allows; otherwise the MP ends DIVERGED.",
        f"nothing yet; `mp-engine status {root}` shows the re-plan",
        mp,
        e,
    )
