"""`mp-engine approve`: lift an ERROR halt on this host."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mp_engine.config.load import load_workspace
from mp_engine.core.exitcodes import ExitCode
from mp_engine.pipeline.engine import Engine


def approve(root: Path, echo: Callable[[str], None]) -> ExitCode:
    ws, config = load_workspace(root)
    engine = Engine.build(ws, config)  # with the git channel, so the lifted halt is pushed
    try:
        approved = engine.approve(via="cli")
    finally:
        engine.sync.close()
    echo(f"approved: the halt on {approved} is lifted" if approved else "the engine is not halted; nothing to approve")
    return ExitCode.OK
