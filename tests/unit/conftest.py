"""What the unit tests of the pass share."""

from __future__ import annotations

import pytest

from mp_engine.config.load import load_config
from mp_engine.pipeline.engine import Engine


@pytest.fixture
def engine(ws) -> Engine:
    """A started engine on the workspace, git off (a test module may define its own)."""
    eng = Engine(ws, load_config(ws.root))
    eng.start(daemon=False)
    return eng
