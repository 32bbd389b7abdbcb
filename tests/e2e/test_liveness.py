"""Liveness that does not lie (issue #32): the remote state says ONLINE from the daemon's
start and OFFLINE from its clean stop, and `once` beside a running daemon exits 4 and
writes nothing (it used to record the engine as stopped while the daemon ran on)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import read_state, wait_for
from tests.e2e.cmd_send.test_send import GIT_ENV
from tests.gitutil import engine_workspace, git, make_remote, remote_file

pytestmark = pytest.mark.daemon


def remote_state(bare) -> dict:
    return json.loads(remote_file(bare, "SESSION_STATE.json") or "{}")


def test_the_remote_says_online_from_the_start_and_offline_from_a_clean_stop(tmp_path, daemon_factory):
    bare = make_remote(tmp_path)
    ws = engine_workspace(tmp_path, f"file://{bare}")
    d = daemon_factory(ws.root, env=GIT_ENV).start()
    up = wait_for(
        lambda: remote_state(bare).get("status") == "ONLINE" and remote_state(bare),
        timeout=30,
        what=lambda: "ONLINE on the remote\n" + d.output()[-3000:],
    )
    assert up["daemon"]["pid"] == d.pid and up["current"] == "IDLE"
    d.signal(signal.SIGTERM)
    assert d.wait() == 0
    down = remote_state(bare)
    assert down["status"] == "OFFLINE" and down["daemon"] is None
    assert git(bare, "log", "-1", "--format=%s", "main") == "mp-engine: engine stopped (OFFLINE)"


def test_once_beside_a_running_daemon_exits_4_and_writes_nothing(tmp_path, daemon_factory):
    bare = make_remote(tmp_path)
    ws = engine_workspace(tmp_path, f"file://{bare}")
    d = daemon_factory(ws.root, env=GIT_ENV).start()
    wait_for(lambda: remote_state(bare).get("status") == "ONLINE", timeout=30, what=lambda: d.output()[-3000:])
    beat = "refs/heads/mp-engine/heartbeat"  # the daemon's first beat (then one per heartbeat_interval)
    wait_for(lambda: beat in git(bare, "for-each-ref", "--format=%(refname)"), timeout=30, what=d.output)
    before = ws.state_file.read_bytes()
    heads = git(bare, "for-each-ref", "--format=%(refname) %(objectname)")
    run = subprocess.run(
        [sys.executable, "-m", "mp_engine", "once", "--root", str(ws.root)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **GIT_ENV},
    )
    assert run.returncode == 4, run.stdout + run.stderr
    assert f"pid {d.pid}" in run.stderr and "`once` is for a workspace no daemon serves" in run.stderr
    assert ws.state_file.read_bytes() == before  # not OFFLINE, not its pid
    assert git(bare, "for-each-ref", "--format=%(refname) %(objectname)") == heads  # no stopped heartbeat
    assert read_state(ws)["status"] == "ONLINE" and read_state(ws)["daemon"]["pid"] == d.pid
    d.signal(signal.SIGTERM)
    d.wait()
