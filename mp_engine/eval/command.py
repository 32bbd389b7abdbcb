"""`mp-engine eval`: a task set through the real pipeline, judged by hidden tests, reported
(issue #43, docs/EVAL.md). The work is `mp_engine/eval/`; this is the command: the task set
and the configurations checked completely before anything starts, the eval directory locked
(one eval at a time in it), the signals, the report, the summary and the exit code (0 every
task judged, 5 stopped first: the same command goes on)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mp_engine.commands.loop import require_chain
from mp_engine.config.load import load_config
from mp_engine.core.errors import ConfigError, DaemonRunning, WorkspaceError
from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.lock import DaemonLock
from mp_engine.core.workspace import CONFIG_FILE, Workspace
from mp_engine.eval import manifest, report
from mp_engine.eval.driver import Eval, EvalScope
from mp_engine.eval.layout import EvalDir
from mp_engine.eval.tasks import TaskSet, load_jsonl
from mp_engine.eval.taskspace import overrides

DEFAULT_OUT = "mp-engine-eval"


@dataclass(frozen=True)
class EvalArgs:
    root: Path
    tasks: Path | None = None
    demo: bool = False
    history: Path | None = None
    since: str | None = None
    count: int = 10
    history_test: str | None = None
    history_setup: str = ""
    configs: tuple[Path, ...] = ()
    parallel: int = 1
    out: Path | None = None
    judge_timeout: float = 1800.0


def eval_(args: EvalArgs, echo: Callable[[str], None]) -> ExitCode:
    configs = manifest.names(config_files(args))
    out = EvalDir(args.out or default_out(args))
    hide = tuple(p.resolve() for p in (args.tasks, args.history) if p is not None)
    for name, path in configs.items():
        check_config(name, path, overrides(path, []))
    lock = DaemonLock(out.lock)
    out.root.mkdir(parents=True, exist_ok=True)
    try:
        lock.acquire(mode="eval")
    except DaemonRunning:
        raise DaemonRunning(
            f"another `mp-engine eval` works in {out.root}: wait for it, or give another --out"
        ) from None
    try:
        tasks = task_set(args, out, echo)
        manifest.begin(out, tasks, configs)
        copies = {name: out.config(name) for name in configs}
        scope = EvalScope(out, tasks, copies, args.parallel, echo, args.judge_timeout, hide)
        code = run_stoppable(Eval(scope), scope)
        doc = report.write(out)
    finally:
        lock.release()
    for line in report.summary_lines(doc):
        echo(line)
    echo(f"report: {out.report('md')} (and report.json, report.html)")
    return code


def config_files(args: EvalArgs) -> list[Path]:
    if args.configs:
        missing = [str(p) for p in args.configs if not p.is_file()]
        if missing:
            raise ConfigError(f"--config {missing[0]}: no such file (give an mp-engine.toml with an [agent] chain)")
        return [p.resolve() for p in args.configs]
    own = args.root / CONFIG_FILE
    if not own.is_file():
        raise WorkspaceError(
            f"no configuration to evaluate: give --config FILE (an mp-engine.toml with an [agent] chain; "
            f"`mp-engine init --agent claude DIR` writes one), or run in a workspace ({own} is missing)"
        )
    return [own.resolve()]


def check_config(name: str, path: Path, env: dict[str, str]) -> None:
    """The configuration loads as `once` will load it (from a workspace's mp-engine.toml,
    with the eval's overrides), and its agent chain can be called here."""
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copyfile(path, Path(tmp) / CONFIG_FILE)
        try:
            config = load_config(Path(tmp), {**os.environ, **env})
        except ConfigError as e:
            raise ConfigError(f"--config {path} ({name}): {e}") from None
    require_chain(config)


def default_out(args: EvalArgs) -> Path:
    name = (
        "demo" if args.demo else (args.history.resolve().name if args.history else (args.tasks or Path("tasks")).stem)
    )
    if (args.root / CONFIG_FILE).is_file():
        return Workspace.at(args.root).evals_dir / name
    return Path.cwd() / DEFAULT_OUT / name


def task_set(args: EvalArgs, out: EvalDir, echo: Callable[[str], None]) -> TaskSet:
    given = [x for x in (args.tasks, args.demo or None, args.history) if x]
    if len(given) != 1:
        raise ConfigError("give exactly one task set: a JSONL file, --demo or --from-history REPO")
    if args.tasks is not None:
        return load_jsonl(args.tasks)
    if args.demo:
        from mp_engine.eval.demo import demo_set

        return demo_set(out.root / "demo")
    from mp_engine.eval.history import from_history

    assert args.history is not None
    return from_history(
        args.history,
        out,
        since=args.since,
        count=args.count,
        test=args.history_test,
        setup=args.history_setup,
        say=echo,
    )


def run_stoppable(ev: Eval, scope: EvalScope) -> ExitCode:
    """The eval, with the engine's stopping rules: the first SIGINT/SIGTERM starts nothing
    more and lets each running `once` checkpoint; the second stops them now. The handlers
    only set events; a thread passes the first on to the children."""

    def handler(_signum: int, _frame: object) -> None:
        (scope.stop_now if scope.stop.is_set() else scope.stop).set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    relay = threading.Thread(target=lambda: scope.stop.wait() and ev.checkpoint(), daemon=True, name="eval-stop")
    relay.start()
    try:
        return ev.run()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        scope.stop.set()  # ends the relay (no child is left to ask)
