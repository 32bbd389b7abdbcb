"""What the agent executor's tests through `Engine.tick()` share."""

from __future__ import annotations

import pytest

from mp_engine.config.load import load_config
from mp_engine.core.workspace import Workspace
from mp_engine.pipeline.engine import Engine
from tests.agentutil import configure


@pytest.fixture
def engine_for(ws: Workspace, monkeypatch):
    """`make(levels, **[agent] settings)`: the workspace configured so, and a started engine
    (settle time 0: a dropped MP is taken at the next tick)."""
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")

    def make(levels, **opts) -> Engine:
        configure(ws, levels, **opts)
        eng = Engine(ws, load_config(ws.root))
        eng.start(daemon=False)
        return eng

    return make
