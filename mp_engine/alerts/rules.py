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
    halted (a pull request's CI rounds used up, its branch moved, the token short of a
      permission, git or the forge saying no; a review round that ended asking),
      pull_request_review_rounds_used
                                 pull_request
"""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass, field
from typing import Any

# An MP that ended asking a person (a task said it is blocked, the hard gate, NEED_INFO, a
# plan that waits for approval):
# its halt is a question, not a failure.
BLOCKED_KINDS = frozenset({"agent_blocked", "agent_hard_gate", "agent_need_info", "agent_plan_review"})
# A pull request's session ended for a person (issue #41; agent/judge/certificate.py's kinds).
PULL_REQUEST_KINDS = frozenset(
    {"pull_request_ci_failed", "pull_request_branch_moved", "forge_auth", "pull_request_git", "pull_request_forge"}
)


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
        self._prs: dict[str, str] = {}  # MP -> its pull request's URL
        self._reviewed: set[str] = set()  # MPs in a review round

    def alert(self, e: dict[str, Any]) -> Alert | None:
        a = self._make(e)
        if a is None or a.kind not in self.on:
            return None
        a.root = self.root
        return a

    def _pull_request(self, e: dict[str, Any]) -> Alert | None:
        """A pull request that needs a person (issue #41): its CI rounds used up, its branch
        moved by someone, the token short of a permission, a review round that ended
        asking, its review rounds used up. Remembers each MP's pull request."""
        name, mp = e.get("event"), str(e.get("mp"))
        if name in ("pull_request_opened", "pull_request_ci", "pull_request_review") and e.get("url"):
            self._prs[mp] = str(e["url"])
        if name == "pull_request_review":
            self._reviewed.add(mp)
        if name == "mp_completed":
            self._reviewed.discard(mp)
        url = self._prs.get(mp, "its pull request")
        if name == "pull_request_review_rounds_used":
            return Alert(
                "pull_request",
                f"mp-engine: the review of {mp} needs a person",
                f"{', '.join(e.get('authors') or []) or 'A reviewer'} commented on {e.get('url') or url} after "
                f"its {e.get('rounds')} review round(s) were used up; the engine acts on it no more.",
                f"answer the comments on {e.get('url') or url} yourself, or send a new MP for the changes",
                mp,
                e,
            )
        failed = self._failed.get(mp, {}) if name == "halted" else {}
        kind = failed.get("kind")
        if kind in PULL_REQUEST_KINDS or (kind in BLOCKED_KINDS and mp in self._reviewed):
            self._failed.pop(mp, None)
            asked = kind in BLOCKED_KINDS
            root = f"--root {self.root}"
            return Alert(
                "pull_request",
                f"mp-engine: {mp}'s pull request needs a person",
                f"{url}: {failed.get('summary')}.\n{failed.get('fix') or ''}".rstrip(),
                f"answer it: `mp-engine answer {mp} 'TEXT' {root}` (the review round goes on)"
                if asked
                else f"act on {url}, then an MP with `{e.get('approve_with')}` or `mp-engine approve {root}`",
                mp,
                e,
            )
        return None

    def _make(self, e: dict[str, Any]) -> Alert | None:
        """The alert event `e` makes, or None. Long because it is the list of the events that
        are alerts, each with the words a person reads."""
        if (pr := self._pull_request(e)) is not None:
            return pr
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
