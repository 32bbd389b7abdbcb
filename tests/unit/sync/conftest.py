"""Fixtures of the channel tests: a bare remote, the engine's clone, an orchestrator's clone."""

from __future__ import annotations

import pytest

from mp_engine.config.load import load_config
from mp_engine.sync.context import SyncContext
from mp_engine.sync.session import GitSession
from tests.gitutil import clone, engine_workspace, make_remote


@pytest.fixture
def channel(tmp_path):
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url)
    orch = clone(url, tmp_path / "orch")
    return bare, url, ws, orch


@pytest.fixture
def parts(channel):
    """The channel's parts over the engine's clone: (bare, ws, orchestrator, context, session)."""
    bare, _url, ws, orch = channel
    s = GitSession(ws.root, 30)
    yield bare, ws, orch, SyncContext(ws, load_config(ws.root).git), s
    s.close()
