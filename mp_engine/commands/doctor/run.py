"""Run every doctor check in order and print one line per check."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mp_engine.commands.doctor import fleet, host, mcp, sandbox, workspace
from mp_engine.commands.doctor import git as git_checks
from mp_engine.commands.doctor.check import FAIL, OK, WARN, Check
from mp_engine.config.load import Config, load_config
from mp_engine.core.errors import ConfigError, WorkspaceError
from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.workspace import Workspace

CHECKS: list[Callable[[Workspace, Config], Check]] = [
    workspace.state_file,
    workspace.stale_run,
    workspace.stop_file,
    git_checks.identity,
    git_checks.remote,
    git_checks.branch,
    git_checks.pushes,
    git_checks.signatures,
    host.inotify,
    host.process_guards,
    host.network_fs,
    host.agent_chain,
    sandbox.sandbox,
    sandbox.endpoints,
    sandbox.codex_home,
    fleet.fleet,
    mcp.mcp_server,
    host.disk,
    git_checks.config_guard,  # last: it guards .git/config for the rest of this process
]


def run_checks(root: Path) -> list[Check]:
    """All checks for the workspace at `root`; later checks are skipped when it is unusable."""
    ws = Workspace.at(root)
    try:
        ws.check()
    except WorkspaceError as e:
        return [Check("workspace", FAIL, str(e), f"mp-engine init {ws.root}")]
    checks = [workspace.workspace(ws)]
    try:
        config = load_config(ws.root)
    except ConfigError as e:
        return [*checks, Check("config", FAIL, str(e).replace("\n", " "), f"edit {ws.config_file}")]
    checks.append(Check("config", OK, f"{ws.config_file.name} is valid"))
    for step in CHECKS:
        try:
            checks.append(step(ws, config))
        except Exception as e:  # a broken check is reported, the others still run
            checks.append(Check(step.__name__, FAIL, f"the check itself failed: {type(e).__name__}: {e}"))
    return checks


def doctor(root: Path, echo: Callable[[str], None], style: Callable[[str, str], str] | None = None) -> ExitCode:
    """Print one line per check (coloured by `style(line, colour)` on a terminal); exit 1
    when a check failed."""
    checks = run_checks(root)
    colours = {OK: "green", WARN: "yellow", FAIL: "red"}
    for c in checks:
        line = c.line()
        echo(style(line, colours[c.level]) if style and c.level != OK else line)
    failed = sum(c.level == FAIL for c in checks)
    warned = sum(c.level == WARN for c in checks)
    echo(f"{len(checks)} checks: {failed} failed, {warned} warnings")
    return ExitCode.MP_ERROR if failed else ExitCode.OK
