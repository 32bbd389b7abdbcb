"""One module per subcommand; cli.py wires them to click. Each returns an `ExitCode`."""

from __future__ import annotations

from pathlib import Path

from mp_engine.config import Config, load_config
from mp_engine.errors import ConfigError
from mp_engine.workspace import Workspace


def load(root: Path) -> tuple[Workspace, Config]:
    """The workspace at `root` and its configuration, both checked completely."""
    ws = Workspace.at(root)
    ws.check()
    return ws, load_config(ws.root)


def load_for_reading(root: Path) -> tuple[Workspace, Config, str | None]:
    """For read-only commands (`status`, `logs`): a configuration error must not blind the
    operator, so the defaults stand in and the error comes back as a warning to show."""
    ws = Workspace.at(root)
    ws.check()
    try:
        return ws, load_config(ws.root), None
    except ConfigError as e:
        return ws, Config(), " ".join(str(e).split())
