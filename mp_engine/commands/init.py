"""`mp-engine init [--remote URL] DIRECTORY`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mp_engine.exitcodes import ExitCode
from mp_engine.sync.setup import setup_remote
from mp_engine.workspace import init_workspace


def init(directory: Path, remote: str | None, branch: str, echo: Callable[[str], None]) -> ExitCode:
    if remote:
        for line in setup_remote(directory, remote, branch):
            echo(line)
        return ExitCode.OK
    ws, created = init_workspace(directory)
    if created:
        echo(f"initialised mp-engine workspace {ws.root}")
        for path in created:
            echo(f"  created {path}")
    else:
        echo(f"{ws.root} is already an mp-engine workspace; nothing changed")
    return ExitCode.OK
