"""The reviewer's prompt (issue #42): the goal, the micro-tasks, the MP's checks with how
each last ran and the end of its output, the whole diff of the work, what it asked
before, and the one answer block it must print (judge/review.py reads it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mp_engine.inbox.mpfile import Block
from mp_engine.record.outcome import fenced

DIFF_CHARS = 200_000  # the whole diff, unless it is larger than a reviewer can read


@dataclass(frozen=True)
class CheckSeen:
    """A check of the MP as it last ran on this work."""

    block: Block
    ok: bool | None  # None: it never ran
    where: str  # the ledger step that ran it
    tail: str


def prompt(
    *,
    mp_id: str,
    goal: str,
    tasks: list[str],
    checks: list[CheckSeen],
    diff: str,
    earlier: list[dict[str, Any]],
    nonce: str,
) -> str:
    """`tasks`: one line per micro-task; `earlier`: the reviews of earlier rounds."""
    out = [
        f"# Review for mp-engine: {mp_id}",
        "",
        "You review; you change nothing (the repository is read-only to you). Every acceptance check",
        "below passed on this work; before it lands, say whether it does what the goal asks, correctly",
        "and completely. Request changes only for concrete problems, each naming the micro-task or the",
        "file to change and what to change; the engine sends them back to the micro-tasks they name.",
        "",
        "## Goal",
        "",
        goal,
        "",
        "## The micro-tasks",
        "",
        *tasks,
        "",
        "## The acceptance checks, as the engine last ran them on this work",
        "",
    ]
    for c in checks:
        state = "never ran" if c.ok is None else ("passed" if c.ok else "FAILED")
        out += [f"{c.block.step_id} ({state}, {c.where or '-'}):", fenced(c.block.body, "bash")]
        out += ["The end of its output:", fenced(c.tail or "(no output)"), ""]
    if not checks:
        out += ["(none)", ""]
    cut = len(diff) > DIFF_CHARS
    out += ["## The whole diff of the work (since the run started)", ""]
    out += [fenced(diff[:DIFF_CHARS] + ("\n[... the diff is cut here]" if cut else "") or "(no change)", "diff"), ""]
    for r in earlier:
        asked = "; ".join(f"{i['target']}: {i['change']}" for i in r.get("items") or []) or "-"
        out += [f"## Your review in round {r['round']}: {r['verdict']}", "", asked, ""]
    if earlier:
        out += ["The micro-tasks named above worked on those changes since; the diff shows the work now.", ""]
    out += answer_part(nonce)
    return "\n".join(out)


def answer_part(nonce: str) -> list[str]:
    """The one block the reviewer must print, approving or listing the changes."""
    return [
        "## Your answer (required; nothing else is read)",
        "",
        f'<review nonce="{nonce}">',
        "VERDICT: approve",
        "</review>",
        "",
        "or, when something must change:",
        "",
        f'<review nonce="{nonce}">',
        "VERDICT: changes",
        "- MT-001: what must change in that micro-task's work, concretely",
        "- path/to/file.py: what must change in that file, concretely",
        "</review>",
        "",
        "Blocks without this exact nonce are ignored.",
        "",
    ]
