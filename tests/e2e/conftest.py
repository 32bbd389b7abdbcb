"""Fixtures of the end-to-end tests: the real daemon on a workspace cloned from a bare remote."""

from __future__ import annotations

import signal

import pytest

from tests.conftest import read_state, wait_for
from tests.forge.scene import forge  # noqa: F401  (the pull-request tests' fixture: GitHub's double, a git remote)
from tests.gitutil import engine_workspace, make_remote

GIT_ENV = {"MP_ENGINE_GIT__POLL_INTERVAL": "0.2"}


@pytest.fixture
def engine(tmp_path, daemon_factory):
    """A bare remote over file://, an engine workspace cloned from it, the daemon running."""
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url)
    d = daemon_factory(ws.root, env=GIT_ENV).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="engine ONLINE")
    yield bare, url, ws, d
    d.signal(signal.SIGTERM)
    d.wait()
