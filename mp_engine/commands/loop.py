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

from mp_engine.commands.doctor.host import missing_commands
from mp_engine.commands.loopview import LiveOut, LoopView, PlainOut
from mp_engine.config.load import Config, load_workspace
from mp_engine.core.atomic import atomic_write
from mp_engine.core.errors import WorkspaceError
from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.terminal import escape_controls
from mp_engine.core.workspace import CONFIG_FILE, Workspace
from mp_engine.record.digest import read_result
from mp_engine.record.stateview import read_view

TITLE_CHARS = 60


def compose(
    goal: str, checks: list[str], plan: bool, now: datetime, max_iterations: int | None = None
) -> tuple[str, str, str]:
    """(the MP's id, its title, its text): an agent MP whose id is the time it was written."""
    mp_id = f"MP-{now:%Y%m%d}.{now:%H%M%S}"
    first = next((ln.strip() for ln in goal.splitlines() if ln.strip()), "loop")
    title = first if len(first) <= TITLE_CHARS else first[: TITLE_CHARS - 3].rsplit(" ", 1)[0] + "..."
    head = [f"# {mp_id} {title}", "Executor: agent", *(["Plan: auto"] if plan else [])]
    head += [f"Max-Iterations: {max_iterations}"] if max_iterations is not None else []
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
    *,
    max_iterations: int | None = None,
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
    require_chain(config)
    require_within_ceiling(config, max_iterations)
    mp_id, title, text = compose(goal, checks, plan, datetime.now(UTC), max_iterations)
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
    if code == ExitCode.MP_ERROR:
        for line in why_it_failed(ws, mp_id):
            echo(line)
    return code


def require_chain(config: Config) -> None:
    """The agent chain can be called here, checked as `doctor` does before anything is
    written: a loop without its agents would only fail and halt the engine (issue #44)."""
    if config.fleet.enabled:  # the fleet's workers call them, with their own CLIs
        return
    if not [lv for lv in config.agent.levels if not lv.hard_gate]:
        raise WorkspaceError(
            f"{CONFIG_FILE} has no agent level to run the loop: add a chain with `mp-engine init --agent NAME` "
            "(claude, codex, aider or ollama; docs/AGENT.md). Nothing was written."
        )
    missing = missing_commands(config.agent.all_levels())
    if missing:
        raise WorkspaceError(
            f"the agent chain's commands are not on PATH: {', '.join(missing)}. Install them, or give absolute "
            f"paths in [[agent.levels]] argv of {CONFIG_FILE} (`mp-engine doctor` checks the chain). "
            "Nothing was written."
        )


def require_within_ceiling(config: Config, max_iterations: int | None) -> None:
    """`--max-iterations` above a ceiling the operator set: refused before anything is
    written, as the engine would refuse the MP (docs/AGENT.md, Per-MP settings)."""
    cap = config.agent.max_iterations
    if max_iterations is not None and "max_iterations" in config.agent.ceilings and max_iterations > cap:
        raise WorkspaceError(
            f"--max-iterations {max_iterations} is above the ceiling {CONFIG_FILE} sets ([agent] max_iterations = "
            f"{cap}, listed in ceilings): ask for at most {cap}, or raise it there. Nothing was written."
        )


def why_it_failed(ws: Workspace, mp_id: str) -> list[str]:
    """The diagnosis and the one fix the result says, under once's summary line."""
    last = read_view(ws.state_file).last_result or {}
    result = read_result(ws.runs_dir / str(last.get("run_id"))) if last.get("mp_id") == mp_id else None
    if not result:
        return [f"the result: {ws.rel(ws.result_file)}"]
    # They may quote an agent's or a check's output: no escape sequence reaches the terminal.
    diagnosis = escape_controls(str((result.get("diagnosis") or {}).get("text") or ""))
    lines = [f"  {diagnosis}"] if diagnosis else []
    if result.get("fix"):
        lines.append(f"  fix: {escape_controls(str(result['fix']))}")
    return [*lines, f"  the whole result: {ws.rel(ws.result_file)}"]
