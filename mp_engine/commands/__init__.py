"""One module per subcommand; cli.py wires them to click. Each returns an `ExitCode`."""

from __future__ import annotations

from pathlib import Path

from mp_engine.config import Config, load_config
from mp_engine.workspace import Workspace


def load(root: Path) -> tuple[Workspace, Config]:
    """The workspace at `root` and its configuration, both checked completely."""
    ws = Workspace.at(root)
    ws.check()
    return ws, load_config(ws.root)
