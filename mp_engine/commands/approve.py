"""`mp-engine approve`: lift an ERROR halt on this host."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mp_engine.commands import load
from mp_engine.engine import Engine
from mp_engine.exitcodes import ExitCode


def approve(root: Path, echo: Callable[[str], None]) -> ExitCode:
    ws, config = load(root)
    engine = Engine.build(ws, config)  # with the git channel, so the lifted halt is pushed
    try:
        approved = engine.approve(via="cli")
    finally:
        engine.sync.close()
    echo(f"approved: the halt on {approved} is lifted" if approved else "the engine is not halted; nothing to approve")
    return ExitCode.OK
