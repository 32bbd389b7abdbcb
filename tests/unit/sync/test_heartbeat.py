"""The heartbeat on a real bare remote: pushed when due, off the channel branch, read back."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from mp_engine.config.load import load_config
from mp_engine.sync.channel import GitChannel
from mp_engine.sync.heartbeat import HEARTBEAT_BRANCH, last_beat_at, parse, verdict
from tests.gitutil import engine_workspace, git, make_remote, remote_log


def beat_on_remote(bare) -> dict | None:
    out = git(bare, "log", "-1", "--format=%B", HEARTBEAT_BRANCH, check=False)
    return parse(out) if out else None


def test_a_beat_goes_to_its_own_branch_and_the_last_one_says_stopped(tmp_path):
    bare = make_remote(tmp_path)
    ws = engine_workspace(tmp_path, f"file://{bare}", heartbeat_interval=300.0)
    ch = GitChannel(ws, load_config(ws.root).git)
    channel_log = remote_log(bare)
    assert ch.heartbeat.beat() is True
    doc = beat_on_remote(bare)
    assert doc["status"] == json.loads(ws.state_file.read_text())["status"] and doc["interval"] == 300.0
    assert doc["unpushed"] == 0 and "blocked" not in doc
    assert verdict(doc)["engine"] == "up"
    assert last_beat_at(ws.local_dir) == doc["at"]  # where the dashboard reads its age
    assert ch.heartbeat.beat() is False  # not due again for 300 s
    ch.stopping()
    assert verdict(beat_on_remote(bare))["engine"] == "stopped"
    assert remote_log(bare) == channel_log  # the channel branch got no commit
    assert git(bare, "rev-list", "--count", HEARTBEAT_BRANCH) == "1"  # no history piles up


def test_off_when_the_interval_is_zero(tmp_path):
    bare = make_remote(tmp_path)
    ws = engine_workspace(tmp_path, f"file://{bare}", heartbeat_interval=0)
    ch = GitChannel(ws, load_config(ws.root).git)
    assert ch.heartbeat.beat() is False
    ch.stopping()
    assert beat_on_remote(bare) is None and last_beat_at(ws.local_dir) is None


def test_a_refused_push_is_reported_once_and_never_raises(tmp_path):
    bare = make_remote(tmp_path)
    ws = engine_workspace(tmp_path, f"file://{bare}", heartbeat_interval=0.01)
    ch = GitChannel(ws, load_config(ws.root).git)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'heartbeats not welcome' >&2\nexit 1\n")
    hook.chmod(0o755)
    emitted = []
    ch.sync.events.emit = lambda name, **kw: emitted.append((name, kw))
    assert ch.heartbeat.beat() is False
    ch.heartbeat._next = 0.0
    assert ch.heartbeat.beat() is False
    assert [n for n, _ in emitted] == ["heartbeat_failed"] and "not welcome" in emitted[0][1]["error"]


def test_the_verdict_of_a_reader():
    now = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)

    def beat(age: float, status: str = "ONLINE") -> dict:
        at = (now - timedelta(seconds=age)).isoformat().replace("+00:00", "Z")
        return {"schema": "mp-engine/heartbeat/1", "at": at, "interval": 300, "status": status}

    assert verdict(beat(100), now)["engine"] == "up"
    assert verdict(beat(700), now)["engine"] == "silent"
    assert verdict(beat(5000, "stopped"), now)["engine"] == "stopped"
    assert verdict(None, now)["engine"] == "unknown"
    doing = {"run_id": "r1", "step": {"id": "step-002", "number": 2, "of": 3}, "unpushed": 2}
    assert {k: verdict({**beat(10), **doing}, now)[k] for k in doing} == doing  # what an orchestrator waits on
    pr = {"number": 3, "url": "https://github.com/me/app/pull/3", "ci_now": "waiting for CI", "waiting": "ci"}
    assert verdict({**beat(10), **doing, "pull_request": pr}, now)["pull_request"] == pr  # issue #41
    assert "pull_request" not in verdict({**beat(700), "pull_request": pr}, now)  # silent: nothing it says holds
    assert parse("not json") is None and parse('{"schema": "other"}') is None
