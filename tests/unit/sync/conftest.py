"""Fixtures of the channel tests: a bare remote, the engine's clone, an orchestrator's clone."""

from __future__ import annotations

import pytest

from tests.gitutil import clone, engine_workspace, make_remote


@pytest.fixture
def channel(tmp_path):
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url)
    orch = clone(url, tmp_path / "orch")
    return bare, url, ws, orch
