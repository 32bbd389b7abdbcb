"""`mp-engine loop`, Loopr's one-shot loop at the terminal (issue #34). `cli.py` adds it to
its group, with its `--root` option; the body is `commands/loop.py`, imported when it runs."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("goal")
@click.option("--check", "checks", multiple=True, metavar="CMD", help="A bash check the work must pass (repeat).")
@click.option("--plan", is_flag=True, help="Have the planner level plan the micro-tasks (Plan: auto).")
def loop(goal: str, checks: tuple[str, ...], plan: bool, root: Path) -> int:
    """Run GOAL with the [agent] chain now, in the foreground, until its checks pass.

    Writes the agent MP (GOAL as its text, each --check a Validate check), runs it as
    `once` does with a live display (task, level, iteration, residual, elapsed; plain
    lines through a pipe), archives it like any run and pushes nothing. Exit codes:
    0 COMPLETED, 1 ERROR (the result says why), 2 usage error or an MP already waiting,
    3 the engine is halted on an earlier MP, 4 a daemon serves the workspace, 5 interrupted.

    \b
    Example:
      mp-engine loop "Add a --json flag to the status command" \\
          --check "pytest -q tests/test_status.py" --check "ruff check ."
    """
    from mp_engine.commands.loop import loop as cmd  # lazy: see cli.py's docstring

    return cmd(root, goal, list(checks), plan, click.echo)
