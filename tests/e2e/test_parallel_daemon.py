"""Parallel tasks through the real daemon and a real git remote (issue #29): four tasks of
2 s each at once and a fifth that needs them; and chaos, a stream of parallel MPs while
the daemon is SIGKILLed at random moments."""

from __future__ import annotations

import json
import os
import random
import signal
import time

import pytest

from mp_engine.core.clock import parse_iso
from tests.agentutil import calls, configure, level
from tests.conftest import events, read_state, wait_for
from tests.e2e.cmd_send.test_send import GIT_ENV, finish, send
from tests.gitutil import clone, engine_workspace, git, make_remote, push_file, remote_file
from tests.unit.agent.run.test_loop import alive
from tests.unit.agent.run.test_scheduler import FIVE, listed

pytestmark = pytest.mark.daemon


def test_four_tasks_of_2_s_run_at_once_and_the_fifth_starts_on_their_integrated_work(tmp_path, daemon_factory):
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url)
    log = tmp_path / "calls.jsonl"
    configure(ws, [level("fast", "good.py", "--log", str(log), "--sleep", "2")], max_parallel=4, land="branch")
    d = daemon_factory(ws.root, env=GIT_ENV).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what=lambda: "engine ONLINE\n" + d.output())
    try:
        code, out, err = finish(send(tmp_path, FIVE, url))
        assert code == 0, err + d.output()
        assert "Certificate: EXACT" in out
        spans = {c["mt"]: (c["t0"], c["t0"] + 2.0) for c in calls(log)}
        four = [spans[f"MT-00{n}"] for n in range(1, 5)]
        assert max(start for start, _ in four) < min(end for _, end in four)  # all four ran at the same time
        integrated = {e["mt"]: parse_iso(e["ts"]).timestamp() for e in events(ws, "micro_task_integrated")}
        assert spans["MT-005"][0] > max(integrated[f"MT-00{n}"] for n in range(1, 5))
        pushed = git(bare, "log", "--format=%s", "mp/MP-9.1").splitlines()
        tasks = [s.split(":")[0] for s in pushed if s.startswith("MP-9.1 MT-")]
        assert sorted(tasks) == [f"MP-9.1 MT-00{n}" for n in range(1, 6)] and tasks[0] == "MP-9.1 MT-005"
        last = json.loads(remote_file(bare, "SYSTEM/RESULT_last.json"))
        assert last["certificate"]["type"] == "EXACT" and last["work"]["branch"] == "mp/MP-9.1"
        assert {t["mt_id"]: len(t["overlapped_with"]) for t in last["micro_tasks"]}["MT-001"] == 3
    finally:
        d.signal(signal.SIGTERM)
        d.wait()


MPS = int(os.environ.get("MP_ENGINE_CHAOS_PARALLEL_MPS", "3"))
KILLS = int(os.environ.get("MP_ENGINE_CHAOS_PARALLEL_KILLS", "2"))  # per MP


def test_random_kills_during_parallel_mps_leave_one_result_each_and_one_commit_per_task(tmp_path, daemon_factory):
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url, poll_interval=0.3)
    log = tmp_path / "calls.jsonl"
    configure(ws, [level("fast", "good.py", "--log", str(log), "--sleep", "0.8")], max_parallel=3, land="branch")
    orch = clone(url, tmp_path / "orch")
    rng = random.Random(int(os.environ.get("MP_ENGINE_CHAOS_SEED", "29")))
    daemon = daemon_factory(ws.root, env=GIT_ENV).start()
    try:
        for n in range(MPS):
            text = listed(
                *(f'Append "{c}{n}" to `notes-{c}.txt`. (after none)' for c in "abc"),
                f'Write "done {n}" to `out/done.txt`. (after MT-001, MT-002, MT-003)',
                checks=[(f"MT-00{k}", f"grep -qx {c}{n} notes-{c}.txt") for k, c in enumerate("abc", 1)]
                + [("MT-004", f"grep -qx 'done {n}' out/done.txt")],
            ).replace("MP-9.1", f"MP-31.{n}")
            push_file(orch, "Claude_Inbox/incoming_microproject.txt", text, f"send MP-31.{n}")
            for _ in range(KILLS):
                time.sleep(rng.uniform(0.3, 2.5))  # a kill at a random moment is the point here
                daemon.kill9()
                daemon = daemon_factory(ws.root, env=GIT_ENV).start()

            def ended(mp_id=f"MP-31.{n}"):
                state = json.loads(remote_file(bare, "SESSION_STATE.json") or "{}")
                return (state.get("last_result") or {}).get("mp_id") == mp_id

            shown = daemon.output
            wait_for(ended, timeout=120, what=lambda shown=shown: "the MP to end\n" + shown()[-3000:])
        results = [json.loads(line) for line in (remote_file(bare, "SYSTEM/results.jsonl") or "").splitlines()]
        assert sorted(r["mp_id"] for r in results) == [f"MP-31.{n}" for n in range(MPS)]  # one result each
        for n in range(MPS):
            assert results[n]["status"] == "COMPLETED", results
            subjects = git(bare, "log", "--format=%s", f"mp/MP-31.{n}").splitlines()
            tasks = [s.split(":")[0] for s in subjects if s.startswith(f"MP-31.{n} MT-")]
            assert sorted(tasks) == sorted(set(tasks)), tasks  # no task integrated twice
            assert all(r["status"] == "COMPLETED" for r in results if r["mp_id"] == f"MP-31.{n}"), results
            assert len(tasks) == 4
    finally:
        daemon.signal(signal.SIGTERM)
        daemon.wait()
    assert not any(alive(c["pid"]) for c in calls(log))  # no task's process left running
