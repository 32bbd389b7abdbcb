"""The agent's claims, parsed and never trusted.

Three forms are recognised, each only with the run's nonce (an echoed file, a log or a
previous run's transcript carries no or another nonce and is ignored):

    <mt_complete nonce="N">evidence</mt_complete>
    <blocked nonce="N">reason</blocked>
    ---LOOPR_STATUS---               (Loopr's status block, plus a NONCE line)
    NONCE: N
    STATUS: IN_PROGRESS | COMPLETE | BLOCKED | ERROR
    EXIT_SIGNAL: true | false
    WORK_TYPE: tests | code | docs | other
    FILES_MODIFIED: <int>
    ERRORS: <int>
    SUMMARY: <one line>
    ---END_LOOPR_STATUS---

A reflector's verdict at a drift check (`parse_verdict`) and a planner's `<plan>` block
(planning.py) carry the nonce the same way.

A claim is only half of the exit gate: the engine runs the checks whatever is claimed.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

VERDICT_RE = re.compile(r"<(aligned|drifted)\b([^>]*)>(.*?)</\1\s*>", re.S | re.I)  # the reflector's
TAG_RE = re.compile(r"<(mt_complete|blocked)\b([^>]*)>(.*?)</\1\s*>", re.S | re.I)
NONCE_ATTR_RE = re.compile(r"""nonce\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>"']+))""", re.I)
STATUS_RE = re.compile(r"---LOOPR_STATUS---[ \t]*\r?\n(.*?)\r?\n[ \t]*---END_LOOPR_STATUS---", re.S)
STATUSES = ("IN_PROGRESS", "COMPLETE", "BLOCKED", "ERROR")
WORK_TYPES = ("tests", "code", "docs", "other")
FIELDS = ("NONCE", "STATUS", "EXIT_SIGNAL", "WORK_TYPE", "FILES_MODIFIED", "ERRORS", "SUMMARY")


@dataclass
class StatusBlock:
    status: str
    exit_signal: bool
    work_type: str
    files_modified: int
    errors: int
    summary: str


@dataclass
class Claims:
    claimed_complete: bool = False
    blocked: bool = False
    blocked_reason: str = ""
    evidence: str = ""  # the body of <mt_complete>
    status: StatusBlock | None = None
    status_problem: str | None = None  # why there is no valid status block
    ignored: list[str] = field(default_factory=list)  # blocks without the run's nonce

    @property
    def status_ok(self) -> bool:
        return self.status is not None

    @property
    def work_type(self) -> str | None:
        return self.status.work_type if self.status else None

    @property
    def summary(self) -> str:
        return self.status.summary if self.status else ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Claims:
        data = dict(data)
        if data.get("status"):
            data["status"] = StatusBlock(**data["status"])
        return cls(**data)


def nonce_of(attrs: str) -> str | None:
    m = NONCE_ATTR_RE.search(attrs)
    return next((g for g in m.groups() if g is not None), None) if m else None


def last_block(output: str, pattern: re.Pattern[str], nonce: str) -> str | None:
    """The body of the last block `pattern` finds (group 1: its attributes, group 2: its
    body) that carries `nonce`, or None: how a planner's plan and a diagnosis are read."""
    found = None
    for m in pattern.finditer(output):
        if nonce_of(m.group(1)) == nonce:
            found = m.group(2)
    return found


def _parse_status(body: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in body.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip().upper()
        if sep and key in FIELDS and key not in values:
            values[key] = value.strip()
    return values


def _status_block(values: dict[str, str]) -> tuple[StatusBlock | None, str | None]:
    missing = [f for f in FIELDS if f not in values]
    if missing:
        return None, f"the status block lacks {', '.join(missing)}"
    status = values["STATUS"].upper()
    if status not in STATUSES:
        return None, f"STATUS {values['STATUS']!r} is not one of {', '.join(STATUSES)}"
    signal = values["EXIT_SIGNAL"].lower()
    if signal not in ("true", "false"):
        return None, f"EXIT_SIGNAL {values['EXIT_SIGNAL']!r} is not true or false"
    work = values["WORK_TYPE"].lower()
    if work not in WORK_TYPES:
        return None, f"WORK_TYPE {values['WORK_TYPE']!r} is not one of {', '.join(WORK_TYPES)}"
    try:
        files, errors = int(values["FILES_MODIFIED"]), int(values["ERRORS"])
    except ValueError:
        return None, "FILES_MODIFIED and ERRORS must be integers"
    return StatusBlock(status, signal == "true", work, files, errors, values["SUMMARY"][:500]), None


def parse_claims(output: str, nonce: str) -> Claims:
    """Everything the output claims under `nonce`; the last valid block of a kind wins."""
    claims = Claims()
    for m in TAG_RE.finditer(output):
        kind, found = m.group(1).lower(), nonce_of(m.group(2))
        if found != nonce:
            claims.ignored.append(f"<{kind}> with {'no nonce' if found is None else 'another nonce'}")
            continue
        body = m.group(3).strip()
        if kind == "mt_complete":
            claims.claimed_complete, claims.evidence = True, body[:4000]
        else:
            claims.blocked, claims.blocked_reason = True, body[:2000] or "(no reason given)"
    problem: str | None = "no status block"
    for m in STATUS_RE.finditer(output):
        values = _parse_status(m.group(1))
        if values.get("NONCE") != nonce:
            claims.ignored.append("status block with " + ("no nonce" if "NONCE" not in values else "another nonce"))
            problem = "no status block with this run's nonce"
            continue
        block, why = _status_block(values)
        if block is None:
            problem = f"invalid status block: {why}"
            continue
        claims.status, problem = block, None
    claims.status_problem = problem if claims.status is None else None
    if claims.status is not None:
        if claims.status.status == "COMPLETE" and claims.status.exit_signal:
            claims.claimed_complete = True
        if claims.status.status == "BLOCKED" and not claims.blocked:
            claims.blocked, claims.blocked_reason = True, claims.status.summary or "(no reason given)"
    return claims


def parse_verdict(output: str, nonce: str) -> dict[str, str]:
    """The reflector's answer at a drift check: `<aligned nonce="N">why</aligned>` or
    `<drifted nonce="N">why</drifted>` (the last one with the run's nonce); "none" when
    it gave neither (no verdict is no evidence of drift)."""
    verdict = {"verdict": "none", "why": "no <aligned> or <drifted> block with the run's nonce"}
    for m in VERDICT_RE.finditer(output):
        if nonce_of(m.group(2)) == nonce:
            verdict = {"verdict": m.group(1).lower(), "why": m.group(3).strip()[:2000] or "(no reason given)"}
    return verdict
