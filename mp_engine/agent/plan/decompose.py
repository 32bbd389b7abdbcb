"""Micro-tasks are generated, never hand-written: the decomposition rule.

Each top-level list item of the MP's instruction text (a line starting in column 1 with
`1.`, `1)`, `-`, `*` or `+` and a space) becomes one micro-task, with its indented or
directly following lines and fenced blocks. Text outside the items is the MP's context,
shown with every micro-task. Without a top-level item, the whole text is one micro-task.

Every Validate check accepts every micro-task, unless its first line is a comment naming
one (`# MT-002`): then it accepts that micro-task and every later one (what is done must
stay done). The Validate section itself is never part of the instructions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mp_engine.core.errors import InvalidMPError
from mp_engine.inbox.lines import Fence, fence_open, heading
from mp_engine.inbox.mpfile import Block, MicroProject

ITEM_RE = re.compile(r"^(?:\d+[.)]|[-*+])[ \t]+(\S.*)$")
CHECK_TAG_RE = re.compile(r"^#[ \t]*(MT-\d{3})\b", re.I)
PAUSE_RE = re.compile(r"\(pause\)[ \t]*", re.I)  # `3. (pause) Run the migration.`, with the space after it
AFTER_RE = re.compile(r"\(after\s+(none|MT-\d{3}(?:\s*,\s*MT-\d{3})*)\s*\)", re.I)  # `(after MT-001)`
DOMAIN_RE = re.compile(r"^\[([A-Za-z][\w-]*)\](?![(\[:])")  # `1. [docs] ...`, not a Markdown link


@dataclass(frozen=True)
class MicroTask:
    mt_id: str
    index: int  # 0-based
    line: int  # 1-based line in the MP
    text: str
    domain: str | None = None  # `1. [docs] ...`: routed to `[[agent.routes]]` with that domain
    after: tuple[int, ...] | None = None  # `(after MT-001)`: the tasks it needs; None: every earlier one
    checks: tuple[int, ...] | None = None  # a planned task: the checks that accept it (planning.py)
    ref: str = ""  # a planned task: the planner's id for it
    files: tuple[str, ...] = ()  # a planned task: the files it names (shown in its prompt)
    pause: bool = (
        False  # `(pause)`: the run stops before it starts, for a person to look (run/guard.py, state/ending.py)
    )

    @property
    def title(self) -> str:
        first = self.text.strip().splitlines()[0] if self.text.strip() else ""
        m = ITEM_RE.match(first)
        first = m.group(1) if m else first
        return first if len(first) <= 80 else first[:77] + "..."


@dataclass(frozen=True)
class Plan:
    goal: str  # the title and the context text around the items
    tasks: tuple[MicroTask, ...]
    check_from: tuple[int, ...]  # per check (in order): index of the first MT it accepts

    def accepting(self, mt_index: int, dead: frozenset[int] = frozenset()) -> list[int]:
        """The indices of the checks that accept micro-task `mt_index`: those of it and of
        earlier ones, except the checks of `dead` micro-tasks (failed or skipped: a task
        that does not depend on them is not held to their checks). A planned task: the
        checks the plan gives it and those of every task it needs, directly or not (they
        all passed, or it would have been skipped)."""
        if self.tasks and self.tasks[mt_index].checks is not None:
            seen: set[int] = set()
            out: set[int] = set()
            todo = [mt_index]
            while todo:
                k = todo.pop()
                if k not in seen:
                    seen.add(k)
                    out.update(self.tasks[k].checks or ())
                    todo.extend(self.needs(k))
            return sorted(out)
        return [i for i, first in enumerate(self.check_from) if first <= mt_index and first not in dead]

    def own(self, mt_index: int, dead: frozenset[int] = frozenset()) -> list[int]:
        """The checks a task is held to when tasks run at once (each in its own worktree):
        its own and those of every task it needs, directly or not, never those of a task
        it does not need (that work is not in its worktree). A listed task without
        `(after ...)` needs every earlier one, so this is `accepting`."""
        if self.tasks and self.tasks[mt_index].checks is not None:
            return self.accepting(mt_index, dead)
        needs, todo = {mt_index}, [mt_index]
        while todo:
            for n in self.needs(todo.pop()) - needs:
                needs.add(n)
                todo.append(n)
        return [i for i, first in enumerate(self.check_from) if first in needs and first not in dead]

    def extended(self, tasks: list[MicroTask]) -> Plan:
        """This plan with a planner's tasks appended (the first plan, or a re-plan's)."""
        return Plan(self.goal, self.tasks + tuple(tasks), self.check_from)

    def checks_for(self, mp: MicroProject, mt_index: int, dead: frozenset[int] = frozenset()) -> list[Block]:
        return [mp.checks[i] for i in self.accepting(mt_index, dead)]

    def needs(self, mt_index: int) -> set[int]:
        """The micro-tasks `mt_index` depends on: those its `(after ...)` names, or every
        earlier one (the textual order, when it names none)."""
        after = self.tasks[mt_index].after
        return set(range(mt_index)) if after is None else set(after)

    def summary(self, mp: MicroProject) -> list[dict[str, Any]]:
        return [
            {
                "id": t.mt_id,
                "line": t.line,
                "title": t.title,
                "domain": t.domain,
                "after": [self.tasks[i].mt_id for i in sorted(self.needs(t.index))],
                **({"ref": t.ref, "files": list(t.files)} if t.checks is not None else {}),
                "checks": [c.step_id for c in self.checks_for(mp, t.index)],
            }
            for t in self.tasks
        ]


def _domain(first_line: str) -> str | None:
    m = ITEM_RE.match(first_line)
    tag = DOMAIN_RE.match(m.group(1)) if m else None
    return tag.group(1).lower() if tag else None


def _after(mp: MicroProject, index: int, line: int, first_line: str) -> tuple[int, ...] | None:
    """`(after MT-001, MT-002)` on an item's first line: the earlier tasks it needs;
    `(after none)`: none. An id that is not an earlier item's is an invalid MP."""
    m = AFTER_RE.search(first_line)
    if m is None:
        return None
    if m.group(1).lower() == "none":
        return ()
    needs = []
    for name in re.split(r"\s*,\s*", m.group(1).upper()):
        k = int(name[3:]) - 1
        if not 0 <= k < index:
            raise InvalidMPError(
                f"MT-{index + 1:03d} says `(after {name})`, but a micro-task can only need earlier ones",
                f"Name only micro-tasks listed before MT-{index + 1:03d} in `(after ...)`, or move the item "
                "(run `mp-engine check` to see the micro-tasks).",
                line=line,
                mp_id=mp.mp_id,
            )
        needs.append(k)
    return tuple(sorted(set(needs)))


def goal_of(mp: MicroProject) -> Plan:
    """A plan before the planner answers (`Plan: auto`): no task yet; the goal is the
    title and the whole instruction text (list items included)."""
    text = _strip([t for _n, t in mp.body])
    return Plan("\n\n".join(p for p in (mp.title, text) if p), (), (0,) * len(mp.checks))


def _unpaused(lines: list[str]) -> list[str]:
    """The item without its `(pause)` mark: a mark for the engine, not an instruction."""
    return [PAUSE_RE.sub("", lines[0]), *lines[1:]] if lines else lines


def _strip(lines: list[str]) -> str:
    return "\n".join(lines).strip("\n")


def decompose(mp: MicroProject) -> Plan:
    """The MP's micro-tasks and the checks that accept each; raises `InvalidMPError`
    when a check names a micro-task that does not exist.
    Long because the list items, their `(after ...)`, routes, pause marks and the checks'
    `# MT-` lines are read in one pass over the MP's lines."""
    items: list[tuple[int, list[str]]] = []
    context: list[str] = []
    current: list[str] | None = None
    open_fence: Fence | None = None
    prev_blank = False
    for lineno, text in mp.body:
        if open_fence is not None:  # inside a fenced block: it belongs where it started
            (current if current is not None else context).append(text)
            if open_fence.closes(text):
                open_fence = None
            continue
        fence = fence_open(text)
        if fence:
            open_fence = fence
            (current if current is not None else context).append(text)
            prev_blank = False
            continue
        blank = not text.strip()
        if ITEM_RE.match(text):
            current = [text]
            items.append((lineno, current))
        elif heading(text):
            current = None
            context.append(text)
        elif blank:
            (current if current is not None else context).append(text)
        elif current is not None and (text[:1] in (" ", "\t") or not prev_blank):
            current.append(text)
        else:
            current = None
            context.append(text)
        prev_blank = blank

    if items:
        tasks = [
            MicroTask(
                f"MT-{n:03d}",
                n - 1,
                line,
                _strip(_unpaused(lines)),
                _domain(lines[0]),
                _after(mp, n - 1, line, lines[0]),
                pause=bool(PAUSE_RE.search(lines[0])),
            )
            for n, (line, lines) in enumerate(items, 1)
        ]
        goal = "\n\n".join(p for p in (mp.title, _strip(context)) if p)
    else:
        text = _strip(context)
        first = next((ln for ln, t in mp.body if t.strip()), 0)
        tasks = [MicroTask("MT-001", 0, first, text)] if text.strip() else []
        goal = mp.title
    ids = {t.mt_id: t.index for t in tasks}
    check_from = []
    for check in mp.checks:
        first_line = next((ln.strip() for ln in check.body.splitlines() if ln.strip()), "")
        m = CHECK_TAG_RE.match(first_line)
        if not m:
            check_from.append(0)
            continue
        mt_id = m.group(1).upper()
        if mt_id not in ids:
            raise InvalidMPError(
                f"check {check.index} names {mt_id}, but the MP decomposes into {', '.join(ids) or 'no micro-task'}",
                f"Correct the `# {mt_id}` comment of check {check.index} (run `mp-engine check` to see the micro-tasks).",
                line=check.line,
                mp_id=mp.mp_id,
            )
        check_from.append(ids[mt_id])
    tasks, check_from = _merge_unchecked(tasks, check_from)
    return Plan(goal=goal, tasks=tuple(tasks), check_from=tuple(check_from))


def _merge_unchecked(tasks: list[MicroTask], check_from: list[int]) -> tuple[list[MicroTask], list[int]]:
    """Every micro-task must be accepted by at least one check of its own (EXACT means
    verified, issue #16). Checks accept their micro-task and every later one, so only the
    first micro-tasks can lack one: when every check names a later micro-task, the ones
    before it are merged into it (one micro-task, its text the items in order, the id of
    the first), and the check tags are renumbered to match. An MP without any check keeps
    its micro-tasks; its claims alone end UNVERIFIED, never EXACT."""
    if not check_from or min(check_from) == 0 or not tasks:
        return tasks, check_from
    k = min(check_from)  # tasks 0..k-1 have no check of their own: fold them into task k
    merged = MicroTask(
        tasks[0].mt_id,
        0,
        tasks[0].line,
        "\n\n".join(t.text for t in tasks[: k + 1]),
        tasks[0].domain or tasks[k].domain,
        (),
    )

    def shifted(after: tuple[int, ...] | None) -> tuple[int, ...] | None:  # the merged ones are index 0 now
        return None if after is None else tuple(sorted({max(0, d - k) for d in after}))

    rest = [
        MicroTask(f"MT-{i + 2:03d}", i + 1, t.line, t.text, t.domain, shifted(t.after))
        for i, t in enumerate(tasks[k + 1 :])
    ]
    return [merged, *rest], [c - k for c in check_from]
