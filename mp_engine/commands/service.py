"""`mp-engine service install`: the systemd unit or launchd plist, rendered with real paths.

The templates are the files under `systemd/` and `launchd/` in the repository (shipped in
the package as `templates/service/`); every `@WORD@` in them is replaced here. The
timeouts come from the workspace's own configuration, so the unit and the engine agree:
TimeoutStopSec outlasts the MP timeout, and WatchdogSec (or launchd's stall limit)
outlasts the longest wait in which the loop proves no progress.
"""

from __future__ import annotations

import grp
import math
import os
import pwd
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from mp_engine.config.load import Config, load_workspace
from mp_engine.core.atomic import atomic_write
from mp_engine.core.errors import ConfigError, MpEngineError
from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.workspace import Workspace

UNIT_NAME = "mp-engine.service"
LAUNCHD_LABEL = "com.mp-engine.agent"
WORKER_LABEL = "com.mp-engine.worker"


@dataclass(frozen=True)
class Rendered:
    manager: str  # "systemd" or "launchd"
    scope: str  # "system" or "user"
    path: Path  # where the file goes
    text: str
    commands: list[str]  # what to run next, exactly
    notes: tuple[str, ...] = ()  # what the operator should know about this rendering


def template(name: str) -> str:
    return resources.files("mp_engine").joinpath("templates", "service", name).read_text(encoding="utf-8")


def detect_manager() -> str:
    return "launchd" if sys.platform == "darwin" else "systemd"


def liveness_bound(config: Config) -> int:
    """Seconds the main loop may legitimately go without progress: a lock wait, then a git
    sync with every push retry, then an idle wait. WatchdogSec and the launchd stall limit
    are this with half again as much margin, and never under a minute."""
    bound = config.engine.lock_timeout + config.engine.poll_interval + config.watch.health_interval
    if config.git.enabled:
        g = config.git
        # ls-remote + fetch, then per attempt a push, and after a rejection fetch + rebase.
        bound += g.timeout * (2 + 3 * g.push_attempts) + g.push_backoff_max * g.push_attempts
    return max(60, math.ceil(bound * 1.5))


def stop_timeout(config: Config) -> int:
    """TimeoutStopSec: the running step may take the whole MP budget to finish on SIGTERM."""
    return math.ceil(config.execution.mp_timeout + config.execution.kill_grace + 30)


def _search_path() -> str:
    seen: dict[str, None] = {}
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry and os.path.isabs(entry):
            seen[entry] = None
    for entry in ("/usr/local/bin", "/usr/bin", "/bin"):
        seen.setdefault(entry, None)
    return os.pathsep.join(seen)


def _interpreter() -> str:
    """The running interpreter as invoked (a venv's bin/python is a symlink to the base
    interpreter; resolving it would lose the venv and its packages)."""
    return os.path.abspath(sys.executable)


def _check_value(name: str, value: str) -> str:
    # A newline or a quote would end the setting early; % is a systemd specifier and & an
    # XML entity. Such paths are rare; refusing them beats a unit that means something else.
    if re.search(r"[\n\r\"'%&<>\\]", value) or value != value.strip():
        raise ConfigError(
            f"the {name} {value!r} contains a character a unit file or plist cannot carry plainly; "
            "use a path without quotes, %, &, <, >, backslashes or surrounding spaces"
        )
    return value


def render(
    ws: Workspace,
    config: Config,
    *,
    manager: str,
    user_scope: bool,
    run_as: str | None = None,
    home: Path | None = None,
    worker: bool = False,
) -> Rendered:
    """Fill in a template; `home` is the installing user's home (for user-scope paths).
    `worker`: a fleet worker's unit (`mp-engine worker --root`, docs/FLEET.md), not the
    engine's.
    Long because it is the unit's or the plist's template, key by key."""
    home = Path(home or Path.home())
    unit, label = ("mp-engine-worker", WORKER_LABEL) if worker else ("mp-engine", LAUNCHD_LABEL)
    values = {
        "PYTHON": _interpreter(),
        "ROOT": str(ws.root),
        "PATH": _search_path(),
        "WATCHDOG_SEC": str(liveness_bound(config)),
        "STALL_LIMIT": str(liveness_bound(config)),
        "TIMEOUT_STOP": str(stop_timeout(config)),
        "LOGDIR": str(home / "Library" / "Logs"),
    }
    if manager == "launchd":
        name, scope = f"{label}.plist", "user"
        path = home / "Library" / "LaunchAgents" / f"{label}.plist"
        target = f"gui/{os.getuid()}"
        q = shlex.quote(str(path))
        commands = [
            f"launchctl bootout {target}/{label} 2>/dev/null; launchctl bootstrap {target} {q}",
            f"launchctl print {target}/{label} | head -20    # state, pid, last exit code",
            f"tail -f {shlex.quote(values['LOGDIR'])}/{unit}.log",
        ]
    elif user_scope:
        name, scope = f"{unit}-user.service", "user"
        config_home = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        path = config_home / "systemd" / "user" / f"{unit}.service"
        commands = [
            "systemctl --user daemon-reload",
            f"systemctl --user enable --now {unit}",
            f"loginctl enable-linger {shlex.quote(pwd.getpwuid(os.getuid()).pw_name)}    # run while logged out",
            f"systemctl --user status {unit}",
            f"journalctl --user -u {unit} -f",
        ]
    else:
        name, scope = f"{unit}.service", "system"
        path = Path("/etc/systemd/system") / f"{unit}.service"
        try:
            entry = pwd.getpwnam(run_as) if run_as else pwd.getpwuid(os.stat(ws.root).st_uid)
        except KeyError as e:
            raise ConfigError(f"there is no user {run_as!r}; create it first (see systemd/mp-engine.service)") from e
        values["USER"] = entry.pw_name
        values["GROUP"] = grp.getgrgid(entry.pw_gid).gr_name
        values["HOME"] = entry.pw_dir
        sudo = "" if os.geteuid() == 0 else "sudo "
        commands = [
            f"{sudo}systemctl daemon-reload",
            f"{sudo}systemctl enable --now {unit}",
            f"systemctl status {unit}",
            f"journalctl -u {unit} -f",
        ]
    notes = []
    if ws.root == Path("/tmp") or any(p in ws.root.parents for p in (Path("/tmp"), Path("/var/tmp"))):
        notes.append(f"{ws.root} is under a temporary directory: PrivateTmp=yes hides it from the service; move it")
    if values.get("USER") == "root":
        notes.append("the unit runs as root: create a dedicated user and pass --run-as NAME (see the unit's comments)")
    text = template(name)
    for key, value in values.items():
        text = text.replace(f"@{key}@", _check_value(key.lower(), value))
    left = sorted(set(re.findall(r"@[A-Z_]+@", text)))
    if left:  # a template word nobody fills in: a bug here, not a user error
        raise MpEngineError(f"template {name} has unfilled words {left}")
    return Rendered(manager=manager, scope=scope, path=path, text=text, commands=commands, notes=tuple(notes))


def install(rendered: Rendered) -> str:
    """Write the file (atomically); return "created", "updated" or "unchanged"."""
    path = rendered.path
    try:
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old == rendered.text:
            return "unchanged"
        path.parent.mkdir(parents=True, exist_ok=True)
        if rendered.manager == "launchd":
            (path.parent.parent / "Logs").mkdir(parents=True, exist_ok=True)
        atomic_write(path, rendered.text)
    except PermissionError as e:
        hint = "run it with sudo, or install a user service with --user" if rendered.scope == "system" else ""
        raise ConfigError(f"cannot write {path}: {e.strerror}. {hint}".strip()) from e
    return "created" if old is None else "updated"


def service_install(
    root: Path,
    user_scope: bool,
    manager: str | None,
    run_as: str | None,
    dry_run: bool,
    echo: Callable[[str], None],
    err: Callable[[str], None],
    worker: bool = False,
) -> ExitCode:
    if worker:  # a worker's directory is no workspace: its configuration is all it needs
        from mp_engine.config.load import load_config

        ws = Workspace.at(root)
        config = load_config(ws.root)
        if not config.fleet.temporal:
            raise ConfigError(
                f"{ws.root / 'mp-engine.toml'} has no [fleet] temporal: the unit runs `mp-engine worker --root "
                f"{ws.root}` with no other flag. Set [fleet] temporal, task_queue and work_remote there (docs/FLEET.md)."
            )
    else:
        ws, config = load_workspace(root)
    manager = manager or detect_manager()
    rendered = render(ws, config, manager=manager, user_scope=user_scope, run_as=run_as, worker=worker)
    if dry_run:
        echo(f"# {rendered.path} ({rendered.manager} {rendered.scope} service; --dry-run: not written)")
        echo(rendered.text.removesuffix("\n"))
    else:
        echo(f"{install(rendered)} {rendered.path}")
    for note in rendered.notes:  # on stderr: --dry-run's stdout is the file and the commands only
        err(f"note: {note}")
    if manager == "launchd" and user_scope:
        err("note: a launchd agent always runs as you; --user changes nothing here")
    echo("then run:" if not dry_run else "# to enable it, after writing it:")
    for command in rendered.commands:
        echo(f"  {command}")
    return ExitCode.OK
