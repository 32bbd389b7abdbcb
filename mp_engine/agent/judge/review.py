"""The reviewer's answer (issue #42), untrusted like every agent's word: only the last
`<review nonce="N">` block with the review's own nonce is read, and a request for changes
counts only with concrete items, each naming a micro-task or a file.

    <review nonce="N">
    VERDICT: changes
    - MT-002: the greeting must end with a full stop
    - src/app.py: handle an empty name
    </review>
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mp_engine.agent.judge.claims import last_block

BLOCK_RE = re.compile(r"<review\b([^>]*)>(.*?)</review\s*>", re.S | re.I)
VERDICT_RE = re.compile(r"^\s*VERDICT\s*:\s*(\w+)", re.M | re.I)
ITEM_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+`?([^\s:`]+)`?\s*:\s*(\S.*)$", re.M)
MT_RE = re.compile(r"^MT-\d{3}$", re.I)
MAX_ITEMS, ITEM_CHARS = 20, 1000


@dataclass(frozen=True)
class Review:
    verdict: str  # "approve", "changes", or "none" (then `error` says why)
    items: list[tuple[str, str]] = field(default_factory=list)  # (target: an MT id or a path, the change)
    error: str = ""


def parse(answer: str, nonce: str) -> Review:
    """The reviewer's verdict under `nonce`; "none" with the reason when there is none."""
    block = last_block(answer, BLOCK_RE, nonce)
    if block is None:
        return Review("none", error="its answer had no <review> block under this review's nonce")
    m = VERDICT_RE.search(block)
    word = m.group(1).lower() if m else ""
    if word in ("approve", "approved"):
        return Review("approve")
    if word not in ("changes", "change", "request_changes"):
        return Review("none", error="its <review> block says neither `VERDICT: approve` nor `VERDICT: changes`")
    items = []
    for target, change in ITEM_RE.findall(block):
        target = target.upper() if MT_RE.match(target) else target.removeprefix("./")
        items.append((target, " ".join(change.split())[:ITEM_CHARS]))
    if not items:
        return Review("none", error="it requested changes but listed no item naming a micro-task or a file")
    return Review("changes", items[:MAX_ITEMS])
