"""Retention through the git channel: pruned runs leave the remote in one commit, the
halt's run and the results index stay (record/retention.py, issue #14)."""

from __future__ import annotations

import json

from mp_engine.record.retention import runs
from tests.conftest import read_state
from tests.gitutil import git, make_engine, push_mp, remote_file, remote_log, sync_tick


def test_pruned_runs_leave_the_channel_in_one_commit(channel, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_ARCHIVE__KEEP_RUNS", "4")
    bare, _url, ws, orch = channel
    engine = make_engine(ws)
    push_mp(orch, "# MP-4.0 Fails\n\n```bash\nexit 2\n```\n")
    assert sync_tick(engine).action == "error"
    approved_run = read_state(ws)["halt"]["run_id"]
    push_mp(orch, "# MP-4.1\nApproves: MP-4.0\n\n```bash\ntrue\n```\n")
    assert sync_tick(engine).action == "completed"
    for n in range(2, 7):
        push_mp(orch, f"# MP-4.{n}\n\n```bash\ntrue\n```\n")
        assert sync_tick(engine).action == "completed"
    [pruned] = [s for s in remote_log(bare) if "pruned" in s]
    assert pruned == "mp-engine: pruned 2 old run(s)"  # at the 6th run (4 kept + 10% slack, at least 1)
    on_remote = {line.split("/")[2] for line in _ls(bare, "SYSTEM/runs") if line.count("/") >= 3}
    # The approved run's halt was lifted, so it is prunable like any other.
    assert on_remote == {r.name for r in runs(ws)} and len(on_remote) == 5 and approved_run not in on_remote
    index = [json.loads(x)["mp_id"] for x in remote_file(bare, "SYSTEM/results.jsonl").splitlines()]
    assert index == [f"MP-4.{n}" for n in range(7)]  # the index keeps every result


def _ls(bare, prefix: str) -> list[str]:
    return git(bare, "ls-tree", "-r", "--name-only", "main", prefix).splitlines()
