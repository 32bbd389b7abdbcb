"""Running the engine on this host: `run`, `once`, `loop`, `eval`, `worker`, and a person's say in
a run (`approve`, `cancel`, `answer`). Each body is `commands/<name>.py`, imported when it runs."""

from __future__ import annotations

from pathlib import Path

import click

from mp_engine.cli.group import root_option
from mp_engine.core.terminal import say_error as _err


@click.command()
@root_option
def run(root: Path) -> int:
    """Run the daemon in the foreground until SIGTERM/SIGINT.

    The first signal finishes the current step and stops (the MP resumes on the next
    start); a second signal stops at once.

    \b
    Example:
      mp-engine run --root ~/mp-workspace
    """
    from mp_engine.commands.run import run as cmd  # lazy: see the module docstring

    return cmd(root)


@click.command()
@root_option
@click.option("--temporal", metavar="HOST:PORT", help="Temporal's frontend (default: [fleet] temporal).")
@click.option("--task-queue", metavar="QUEUE", help="The queue to serve (default: [fleet] task_queue).")
@click.option("--max-parallel", type=click.IntRange(1, 64), help="Attempts at once (default: [agent] max_parallel).")
@click.option("--remote", metavar="URL", help="The work repository (default: [fleet] work_remote).")
@click.option("--name", metavar="NAME", help="This worker's name in Temporal and `status` (default: its pid).")
@click.option("--metrics", metavar="HOST:PORT", default="", help="Serve the worker's Prometheus metrics here.")
def worker(root: Path, temporal: str | None, task_queue: str | None, max_parallel: int | None, **more: str) -> int:
    """Run agent tasks for channel engines on this host, through Temporal (docs/FLEET.md).

    The root directory holds the worker's mp-engine.toml: its own [agent] levels and
    credentials, which never travel. Needs the fleet extra: pip install 'mp-engine[fleet]'.

    \b
    Example:
      mp-engine worker --temporal 10.0.0.5:7233 --task-queue mp-engine --max-parallel 2 --root ~/mp-worker
    """
    from mp_engine.commands.worker import worker as cmd  # lazy: see the module docstring

    return cmd(root, temporal, task_queue, max_parallel, more["remote"], more["name"], more["metrics"], click.echo)


@click.command()
@root_option
def once(root: Path) -> int:
    """Do exactly one pass: run the waiting MP, if any, and exit.

    \b
    Exit codes: 0 completed or nothing to do, 1 the MP ended in ERROR, 2 usage or config
    error, 3 halted (an MP waits for approval), 4 workspace busy, 5 interrupted.

    \b
    Example (cron, or a CI job that runs one MP):
      mp-engine once --root ~/mp-workspace
    """
    from mp_engine.commands.once import once as cmd  # lazy: see the module docstring

    return cmd(root, click.echo)


@click.command()
@root_option
def approve(root: Path) -> int:
    """Lift an ERROR halt so the engine takes new MPs again.

    The orchestrator's way is an MP whose header says `Approves: <MP id>`; this is the
    operator's, on the engine host.

    \b
    Example:
      mp-engine approve --root ~/mp-workspace
    """
    from mp_engine.commands.approve import approve as cmd  # lazy: see the module docstring

    return cmd(root, click.echo)


@click.command()
@root_option
@click.argument("mp_id", metavar="[MP-ID]", required=False)
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds to wait for the engine to act.")
def cancel(root: Path, mp_id: str | None, timeout: float) -> int:
    """Cancel the running MP (or MP-ID, running or waiting in the inbox) on this host.

    The running step's whole process group is stopped; the result is CANCELLED and the
    engine goes on without a halt. Exit 0 once the engine has acted, 7 when it has not
    within --timeout (the request stays: a stopped daemon acts on it when it starts).

    \b
    Example:
      mp-engine cancel --root ~/mp-workspace
    """
    from mp_engine.commands.cancel import cancel as cmd  # lazy: see the module docstring

    return cmd(root, mp_id, timeout, click.echo, _err)


@click.command()
@root_option
@click.argument("mp_id", metavar="MP-ID")
@click.argument("text", required=False)
@click.option("--file", "file", type=click.File("r"), help="Read the answer from this file (`-`: stdin).")
@click.option("--mt", metavar="MT-ID", help="The micro-task answered (default: the one that asked).")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds to wait for the engine to act.")
def answer(root: Path, mp_id: str, text: str | None, file, mt: str | None, timeout: float) -> int:
    """Answer the agent MP the engine is halted on because it asked; the same run goes on.

    \b
    Example:
      mp-engine answer MP-2.1 "Use PostgreSQL 16; the password is in ~/.pgpass on the CI host."
    """
    from mp_engine.commands.answer import answer as cmd  # lazy: see the module docstring

    return cmd(root, mp_id, file.read() if file else text or "", mt, timeout, click.echo, _err)


@click.command()
@click.argument("goal")
@click.option("--check", "checks", multiple=True, metavar="CMD", help="A bash check the work must pass (repeat).")
@click.option("--plan", is_flag=True, help="Have the planner level plan the micro-tasks (Plan: auto).")
@click.option(
    "--max-iterations",
    type=click.IntRange(min=1),
    metavar="N",
    help="Agent iterations for this goal (Max-Iterations:; default [agent] max_iterations, 30).",
)
def loop(goal: str, checks: tuple[str, ...], plan: bool, max_iterations: int | None, root: Path) -> int:
    """Run GOAL with the [agent] chain now, in the foreground, until its checks pass.

    Writes the agent MP (GOAL as its text, each --check a Validate check), runs it as
    `once` does with a live display (task, level, iteration, residual, elapsed; plain
    lines through a pipe), archives it like any run and pushes nothing. Exit codes:
    0 COMPLETED, 1 ERROR (the result says why), 2 usage error or an MP already waiting,
    3 the engine is halted on an earlier MP, 4 a daemon serves the workspace, 5 interrupted.

    \b
    Example:
      mp-engine loop "Add a --json flag to the status command" \\
          --check "pytest -q tests/test_status.py" --check "ruff check ." --max-iterations 10
    """
    from mp_engine.commands.loop import loop as cmd  # lazy: see cli.py's docstring

    return cmd(root, goal, list(checks), plan, click.echo, max_iterations=max_iterations)


@click.command(name="eval")
@root_option
@click.argument("tasks", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--demo", is_flag=True, help="The demo set shipped with mp-engine (tiny repositories, a real bug each).")
@click.option(
    "--from-history",
    "history",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="REPO",
    help="Tasks from REPO's own commits that changed code and tests together.",
)
@click.option("--since", metavar="REV", help="--from-history: only commits after REV.")
@click.option(
    "-n", "count", type=click.IntRange(1), default=10, show_default=True, help="--from-history: at most N tasks."
)
@click.option("--test", "history_test", metavar="CMD", help="--from-history: the test command, with {tests} or {test}.")
@click.option("--setup", "history_setup", metavar="CMD", default="", help="--from-history: the setup command.")
@click.option(
    "--config",
    "configs",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="An mp-engine.toml whose agent chain to evaluate (repeat to compare; default: the workspace's).",
)
@click.option("--parallel", type=click.IntRange(1, 64), default=1, show_default=True, help="Tasks at once.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="The eval directory (default: SYSTEM/.engine/eval/NAME in a workspace, else ./mp-engine-eval/NAME).",
)
@click.option(
    "--judge-timeout", type=float, default=1800.0, show_default=True, help="Seconds for one setup or test run."
)
def eval_(root: Path, tasks: Path | None, configs: tuple[Path, ...], **opts) -> int:
    """Run a task set through the agent chain and judge it with tests the agent never saw.

    Each task runs as an agent MP in a fresh workspace of its repository at its base commit
    (`mp-engine once`, archived like any run); the judging tests are applied afterwards, in a
    copy the agent never saw. The report (resolve rate with its 95 % interval, time, cost,
    overhead, paired comparisons between configurations) is written to the eval directory.
    Stopped or killed, the same command goes on with the tasks not judged yet. Exit codes:
    0 every task judged, 2 usage or configuration error, 4 another eval works in --out,
    5 stopped first (run it again to go on). docs/EVAL.md.

    \b
    Examples:
      mp-engine eval --demo --config cheap.toml --config strong.toml --parallel 2
      mp-engine eval swe-bench-lite.jsonl --config claude.toml --parallel 4
      mp-engine eval --from-history ~/src/app --since v1.0 -n 20 --test "python -m pytest -q {tests}"
    """
    from mp_engine.eval.command import EvalArgs  # lazy: see the module docstring
    from mp_engine.eval.command import eval_ as cmd

    return cmd(EvalArgs(root=root, tasks=tasks, configs=configs, **opts), click.echo)


COMMANDS = (run, once, root_option(loop), eval_, worker, approve, cancel, answer)
