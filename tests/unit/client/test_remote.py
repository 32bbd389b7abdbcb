"""`status --remote` as the orchestrator's side reads it: the pull request of the running
MP (its heartbeat) or of the last result (issue #41). The whole exchange against the real
daemon: tests/e2e/cmd_send/test_send.py."""

from __future__ import annotations

import json

from mp_engine.client import remote
from mp_engine.sync.session import GitSession
from tests.gitutil import git


def test_the_last_result_s_pull_request_is_read_at_the_tip_and_a_broken_file_is_none(tmp_path):
    repo = tmp_path / "channel"
    git(tmp_path, "init", "--quiet", "-b", "main", str(repo))
    (repo / "SYSTEM").mkdir()
    pr = {"number": 5, "url": "https://github.com/me/app/pull/5", "ci_rounds": [{"state": "passed"}]}
    tips = []
    for text in (json.dumps({"mp_id": "MP-3.1", "pull_request": pr}), "not json", "[1]"):
        (repo / "SYSTEM" / "RESULT_last.json").write_text(text)
        git(repo, "add", "-A")
        git(repo, "commit", "--quiet", "-m", "result")
        tips.append(git(repo, "rev-parse", "HEAD").strip())
    s = GitSession(repo, 30)
    try:
        assert remote.last_result(s, tips[0])["pull_request"] == pr
        assert remote.last_result(s, tips[1]) == {} and remote.last_result(s, tips[2]) == {}
    finally:
        s.close()


def test_status_remote_says_the_pull_request_and_ci_s_word(monkeypatch):
    report = {
        "tip": "a" * 40,
        "state": {"status": "RUNNING", "current": "MP-3.1", "last_updated": "now"},
        "engine": {"engine": "up"},
        "progress": "running MP-3.1",
        "inbox": None,
        "pull_request": {"number": 5, "url": "https://github.com/me/app/pull/5", "ci_rounds": ["failed"]},
    }
    monkeypatch.setattr(remote, "read_remote", lambda sender: report)
    out: list[str] = []
    assert remote.remote_status("file:///nowhere", "main", False, out.append, out.append) == 0
    assert "  pull request: #5 https://github.com/me/app/pull/5 (CI: failed)" in out[0].splitlines()
    report["pull_request"] = {**report["pull_request"], "ci_now": "waiting for CI (1 pending)", "ci_rounds": []}
    out.clear()
    remote.remote_status("file:///nowhere", "main", False, out.append, out.append)
    assert "(CI: waiting for CI (1 pending))" in out[0]
