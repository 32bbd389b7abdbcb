"""`mp-engine loop "GOAL" --check "CMD"`: Loopr's one-shot loop at the terminal (issue #34).

It writes the agent MP a person would otherwise write by hand (the goal as its text, each
`--check` a Validate check, `--plan` for `Plan: auto`), drops it into the workspace's
inbox, and runs it in the foreground as `once` does (the daemon lock, the signals, the run
archived like any other), with git sync off for this run: it pushes nothing. A terminal
gets a live table (loopview.py), a pipe plain lines. The exit code is `once`'s: 0
COMPLETED, 1 ERROR, 3 the engine is halted (nothing written), 5 interrupted (the MP
resumes on the next start).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from mp_engine.commands.loopview import LiveOut, LoopView, PlainOut
from mp_engine.config.load import load_workspace
from mp_engine.core.atomic import atomic_write
from mp_engine.core.errors import WorkspaceError
from mp_engine.core.exitcodes import ExitCode
from mp_engine.record.stateview import read_view

TITLE_CHARS = 60


def compose(goal: str, checks: list[str], plan: bool, now: datetime) -> tuple[str, str, str]:
    """(the MP's id, its title, its text): an agent MP whose id is the time it was written."""
    mp_id = f"MP-{now:%Y%m%d}.{now:%H%M%S}"
    first = next((ln.strip() for ln in goal.splitlines() if ln.strip()), "loop")
    title = first if len(first) <= TITLE_CHARS else first[: TITLE_CHARS - 3].rsplit(" ", 1)[0] + "..."
    head = [f"# {mp_id} {title}", "Executor: agent", *(["Plan: auto"] if plan else [])]
    body = ["", goal.strip(), ""]
    if checks:
        body += ["## Validate", ""]
        for cmd in checks:
            fence = "````" if "```" in cmd else "```"
            body += [f"{fence}bash", cmd.rstrip("\n"), fence, ""]
    return mp_id, title, "\n".join(head + body)


def loop(
    root: Path,
    goal: str,
    checks: list[str],
    plan: bool,
    echo: Callable[[str], None],
    out: TextIO | None = None,
) -> ExitCode:
    from mp_engine.commands.once import alone, one_pass

    out = out or sys.stdout
    ws, config = load_workspace(root)
    if not goal.strip():
        raise WorkspaceError(
            "The goal is empty: say what the agent should do, e.g. mp-engine loop 'Add a --json flag'."
        )
    halt = read_view(ws.state_file).halt
    if halt is not None:  # the MP would only wait in the inbox: say so and write nothing
        echo(
            f"halted on {halt.mp_id}: {halt.reason}. Read SYSTEM/RESULT_last.md, then `mp-engine approve` "
            "(or `mp-engine answer` when it asked), and run `mp-engine loop` again."
        )
        return ExitCode.HALTED
    if ws.inbox_file.exists():
        raise WorkspaceError(
            f"{ws.rel(ws.inbox_file)} already holds an MP: run it first (`mp-engine once`) or move it away, "
            "then run `mp-engine loop` again."
        )
    mp_id, title, text = compose(goal, checks, plan, datetime.now(UTC))
    here = config.model_copy(
        update={
            "git": config.git.model_copy(update={"enabled": False}),  # pushes nothing
            "engine": config.engine.model_copy(update={"settle_seconds": 0.0}),  # written whole, below
        }
    )
    view = LoopView(mp_id, title)
    shown = LiveOut(view, out) if out.isatty() else PlainOut(view, out)
    said: list[str] = []  # once's summary line: after the display, never drawn over
    with alone(ws, "loop"), shown:
        atomic_write(ws.inbox_file, text)
        code = one_pass(ws, here, said.append, listeners=[shown])
    for line in said:
        echo(line)
    return code
