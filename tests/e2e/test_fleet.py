"""The fleet through real parts (issue #30): a Temporal dev server on loopback, three
`mp-engine worker` processes each with its own clone of a local bare remote, the engine
daemon, and fake agents. Planned work spreads over the workers; a worker, the server and
the engine each die by `kill -9` mid-task and the MP still ends with one result and one
commit per task; a cancel stops every attempt; with no worker polling, the MP waits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mp_engine.record.archive import RunArchive
from tests.agentutil import calls, configure, level, planner, records, task
from tests.conftest import events, read_state, wait_for
from tests.e2e.cmd_send.test_send import GIT_ENV, finish, send
from tests.fleetutil import FleetWorker, TemporalServer, add_fleet, free_port
from tests.gitutil import engine_workspace, git, make_remote, remote_file
from tests.unit.agent.run.test_loop import alive

pytestmark = pytest.mark.daemon

LETTERS = "abcdef"
SIX = """# MP-30.1 Six files, planned
Executor: agent
Plan: auto

Create the six files the checks ask for.

## Validate

""" + "\n".join(f"```bash\ngrep -qx {c} out/{c}.txt\n```\n" for c in LETTERS)
SIX_PLAN = {"tasks": [task(f"t{n}", (c, f"out/{c}.txt"), checks=(f"check-00{n}",)) for n, c in enumerate(LETTERS, 1)]}


@pytest.fixture(scope="module")
def temporal(tmp_path_factory) -> Iterator[TemporalServer]:
    server = TemporalServer(tmp_path_factory.mktemp("temporal")).start()
    yield server
    server.close()


class Fleet:
    """A bare remote, an engine workspace on it with `[fleet]`, and workers."""

    def __init__(self, tmp: Path, server: TemporalServer, *, sleep: float = 2.0, **agent):
        self.tmp = tmp
        self.server = server
        self.bare = make_remote(tmp)
        self.url = f"file://{self.bare}"
        self.queue = f"q-{os.getpid()}-{tmp.name}"
        self.log = tmp / "calls.jsonl"
        self.level = level("fast", "good.py", "--log", str(self.log), "--sleep", str(sleep))
        self.ws = engine_workspace(tmp, self.url)
        self.answers = tmp / "answers"
        configure(self.ws, [self.level], planner=planner(self.answers, SIX_PLAN), land="branch", **agent)
        add_fleet(self.ws, server.address, self.queue)
        self.workers: list[FleetWorker] = []

    def worker(self, name: str, **kw) -> FleetWorker:
        w = FleetWorker(self.tmp, name, self.server.address, self.queue, self.url, [self.level], **kw).start()
        self.workers.append(w)
        return w

    def logs(self) -> str:
        return "\n".join(f"--- {w.name}\n{w.output()[-3000:]}" for w in self.workers)

    def close(self) -> None:
        for w in self.workers:
            w.close()


@pytest.fixture
def fleet(tmp_path, temporal) -> Iterator[Fleet]:
    f = Fleet(tmp_path, temporal, max_parallel=6)
    yield f
    f.close()


def result(bare: Path) -> dict:
    return json.loads(remote_file(bare, "SYSTEM/RESULT_last.json") or "{}")


def task_commits(bare: Path, mp_id: str) -> list[str]:
    subjects = git(bare, "log", "--format=%s", f"mp/{mp_id}").splitlines()
    return [s.split(":")[0] for s in subjects if s.startswith(f"{mp_id} MT-")]


def only_run(ws) -> RunArchive:
    runs = [p for p in ws.runs_dir.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return RunArchive(runs[0])


def test_six_planned_tasks_spread_over_three_workers_one_commit_each(fleet, daemon_factory):
    for name in ("w1", "w2", "w3"):
        fleet.worker(name, max_parallel=2)
    d = daemon_factory(fleet.ws.root, env=GIT_ENV).start()
    code, out, err = finish(send(fleet.tmp, SIX, fleet.url, "--timeout", "120"), timeout=150)
    assert code == 0, err + d.output()[-5000:] + fleet.logs()
    assert "Certificate: EXACT" in out
    by_task = {r["mt"]: r["worker"] for r in records(only_run(fleet.ws))}
    assert sorted(by_task) == [f"MT-00{n}" for n in range(1, 7)]
    # Six tasks at once, two per worker at most: every worker ran some.
    assert set(by_task.values()) == {w.identity for w in fleet.workers}, by_task
    ran_in = {c["mt"]: Path(c["cwd"]).parts for c in calls(fleet.log)}
    assert all(f"worker-{by_task[mt].split('@')[0]}" in parts for mt, parts in ran_in.items())  # on that worker
    assert sorted(task_commits(fleet.bare, "MP-30.1")) == [f"MP-30.1 MT-00{n}" for n in range(1, 7)]
    for c in LETTERS:
        assert git(fleet.bare, "show", f"mp/MP-30.1:out/{c}.txt") == c
    assert not git(fleet.bare, "branch", "--list", "mp-task/*")  # the attempts' branches are gone
    d.signal(signal.SIGTERM)
    d.wait()


ONE = """# MP-30.2 One file
Executor: agent

Write "a" to `out/a.txt`.

## Validate

```bash
grep -qx a out/a.txt
```
"""

TWO = """# MP-30.3 Two files
Executor: agent

1. Write "a" to `out/a.txt`. (after none)
2. Write "b" to `out/b.txt`. (after none)

## Validate

```bash
# MT-001
grep -qx a out/a.txt
```

```bash
# MT-002
grep -qx b out/b.txt
```
"""


def started(log: Path, n: int = 1) -> list[dict]:
    """The agent calls logged so far, once there are at least `n`."""
    got = calls(log)
    return got if len(got) >= n else []


def kill_left(log: Path) -> None:
    """The agents a killed worker left running (its orphans) end with the test."""
    for c in calls(log):
        if alive(c["pid"]):
            os.kill(c["pid"], signal.SIGKILL)


def test_a_worker_killed_mid_task_its_attempt_completes_on_another(tmp_path, temporal, daemon_factory):
    fleet = Fleet(tmp_path, temporal, sleep=4.0)
    try:
        workers = {w.identity: w for w in (fleet.worker("w1", max_parallel=1), fleet.worker("w2", max_parallel=1))}
        d = daemon_factory(fleet.ws.root, env=GIT_ENV).start()
        waiting = send(fleet.tmp, ONE, fleet.url, "--timeout", "120")
        first = wait_for(lambda: started(fleet.log), timeout=60, what=lambda: d.output()[-3000:] + fleet.logs())[0]
        victim = next(w for w in workers.values() if f"worker-{w.name}" in Path(first["cwd"]).parts)
        victim.kill9()
        code, out, err = finish(waiting, timeout=150)
        assert code == 0, err + d.output()[-5000:] + fleet.logs()
        assert "Certificate: EXACT" in out
        (rec,) = records(only_run(fleet.ws))
        survivor = next(i for i in workers if i != victim.identity)
        assert rec["worker"] == survivor and rec["tries"] == 2  # Temporal's retry, on the other worker
        ran = [Path(c["cwd"]).parts for c in calls(fleet.log)]
        assert len(ran) == 2 and f"worker-{victim.name}" in ran[0] and f"worker-{victim.name}" not in ran[1]
        assert task_commits(fleet.bare, "MP-30.2") == ["MP-30.2 MT-001"]  # integrated once
        d.signal(signal.SIGTERM)
        d.wait()
    finally:
        kill_left(fleet.log)
        fleet.close()


def test_temporal_killed_mid_task_and_restarted_on_its_database_the_mp_completes(tmp_path, daemon_factory):
    server = TemporalServer(tmp_path / "temporal-own").start() if (tmp_path / "temporal-own").mkdir() is None else None
    fleet = Fleet(tmp_path, server, sleep=3.0)
    try:
        fleet.worker("w1", max_parallel=1)
        d = daemon_factory(fleet.ws.root, env=GIT_ENV).start()
        waiting = send(fleet.tmp, ONE, fleet.url, "--timeout", "150")
        wait_for(lambda: started(fleet.log), timeout=60, what=lambda: d.output()[-3000:] + fleet.logs())
        server.kill9()
        wait_for(
            lambda: any(e["event"] == "fleet_waiting" for e in events(fleet.ws)),
            timeout=60,
            what=lambda: "the engine to notice\n" + d.output()[-3000:],
        )

        def status() -> str:
            return subprocess.run(
                [sys.executable, "-m", "mp_engine", "status", "--root", str(fleet.ws.root)],
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout

        shown = wait_for(lambda: "waiting for Temporal" in (out := status()) and out, timeout=30, what=status)
        assert "MT-001: iteration 1, level 0 (fast)" in shown and f"waiting for Temporal at {server.address}" in shown
        assert f"Temporal at {server.address} is unreachable" in shown  # the fleet's own line
        assert read_state(fleet.ws)["status"] == "RUNNING"
        server.start()  # the same port, the same SQLite file
        code, out, err = finish(waiting, timeout=180)
        assert code == 0, err + d.output()[-5000:] + fleet.logs()
        assert "Certificate: EXACT" in out
        results = (remote_file(fleet.bare, "SYSTEM/results.jsonl") or "").splitlines()
        assert [json.loads(r)["mp_id"] for r in results] == ["MP-30.2"]  # one result
        assert task_commits(fleet.bare, "MP-30.2") == ["MP-30.2 MT-001"]
        d.signal(signal.SIGTERM)
        d.wait()
    finally:
        fleet.close()
        server.close()


def test_the_engine_killed_mid_mp_reattaches_to_the_running_attempts(tmp_path, temporal, daemon_factory):
    fleet = Fleet(tmp_path, temporal, sleep=4.0, max_parallel=2)
    try:
        fleet.worker("w1", max_parallel=2)
        d = daemon_factory(fleet.ws.root, env=GIT_ENV).start()
        waiting = send(fleet.tmp, TWO, fleet.url, "--timeout", "150")
        wait_for(lambda: started(fleet.log, 2), timeout=60, what=lambda: d.output()[-3000:] + fleet.logs())
        before = [e["attempt"] for e in events(fleet.ws, "fleet_started")]
        d.kill9()
        d = daemon_factory(fleet.ws.root, env=GIT_ENV).start()
        code, out, err = finish(waiting, timeout=180)
        assert code == 0, err + d.output()[-5000:] + fleet.logs()
        assert "Certificate: EXACT" in out
        attached = [e["attempt"] for e in events(fleet.ws, "fleet_attached")]
        assert sorted(attached) == sorted(before) and len(before) == 2  # the same attempts, found again
        assert [e["attempt"] for e in events(fleet.ws, "fleet_started")] == before  # no new attempt id
        assert len(calls(fleet.log)) == 2  # each agent ran once
        results = (remote_file(fleet.bare, "SYSTEM/results.jsonl") or "").splitlines()
        assert [json.loads(r)["mp_id"] for r in results] == ["MP-30.3"]
        assert sorted(task_commits(fleet.bare, "MP-30.3")) == ["MP-30.3 MT-001", "MP-30.3 MT-002"]
        d.signal(signal.SIGTERM)
        d.wait()
    finally:
        fleet.close()


def test_cancel_stops_every_attempt_on_the_workers(tmp_path, temporal, daemon_factory, record_property):
    fleet = Fleet(tmp_path, temporal, sleep=120.0, max_parallel=2)
    try:
        fleet.worker("w1", max_parallel=1)
        fleet.worker("w2", max_parallel=1)
        d = daemon_factory(fleet.ws.root, env=GIT_ENV).start()
        waiting = send(fleet.tmp, TWO, fleet.url, "--timeout", "120")
        running = wait_for(lambda: started(fleet.log, 2), timeout=60, what=lambda: d.output()[-3000:] + fleet.logs())
        t0 = time.monotonic()
        cancel = subprocess.run(
            [sys.executable, "-m", "mp_engine", "cancel", "MP-30.3", "--root", str(fleet.ws.root), "--timeout", "60"],
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert cancel.returncode == 0, cancel.stdout + cancel.stderr + d.output()[-3000:]
        code, out, err = finish(waiting, timeout=90)
        assert "CANCELLED" in out, out + err + d.output()[-3000:]
        # Killed on their workers long before their 120 s were up.
        wait_for(lambda: not any(alive(c["pid"]) for c in running), timeout=30, what="the agents to be stopped")
        record_property("seconds_from_cancel_to_every_agent_stopped", round(time.monotonic() - t0, 2))
        assert {Path(c["cwd"]).parts[-4] for c in running} == {"worker-w1", "worker-w2"}
        d.signal(signal.SIGTERM)
        d.wait()
    finally:
        kill_left(fleet.log)
        fleet.close()


def test_with_no_worker_status_and_doctor_say_so_and_the_mp_waits_for_one(tmp_path, temporal, daemon_factory):
    fleet = Fleet(tmp_path, temporal, sleep=0.5)
    try:
        d = daemon_factory(fleet.ws.root, env=GIT_ENV).start()
        waiting = send(fleet.tmp, ONE, fleet.url, "--timeout", "120")
        wait_for(lambda: events(fleet.ws, "fleet_started"), timeout=60, what=lambda: d.output()[-3000:])

        def cli(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-m", "mp_engine", *args, "--root", str(fleet.ws.root)],
                capture_output=True,
                text=True,
                timeout=60,
            )

        status = wait_for(lambda: "queued on" in (out := cli("status").stdout) and out, timeout=30)
        assert f"queue {fleet.queue}: no worker polling" in status
        assert f"MT-001: iteration 1, level 0 (fast), 0 s, queued on {fleet.queue}" in status or (
            f"queued on {fleet.queue}" in status and "MT-001: iteration 1, level 0 (fast)" in status
        ), status
        doctor = cli("doctor")
        assert doctor.returncode == 1 and f"no worker polls {fleet.queue}" in doctor.stdout, doctor.stdout
        assert read_state(fleet.ws)["status"] == "RUNNING" and not calls(fleet.log)
        w = fleet.worker("late", max_parallel=1)
        code, out, err = finish(waiting, timeout=150)
        assert code == 0 and "Certificate: EXACT" in out, err + d.output()[-3000:] + fleet.logs()
        assert records(only_run(fleet.ws))[0]["worker"] == w.identity
        assert f"1 worker(s) polling: {w.identity}" in cli("status").stdout
        d.signal(signal.SIGTERM)
        d.wait()
    finally:
        fleet.close()


def test_temporal_unreachable_at_start_exits_2_with_the_fix(tmp_path):
    ws = engine_workspace(tmp_path, f"file://{make_remote(tmp_path)}")
    configure(ws, [level("fast", "good.py")])
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    add_fleet(ws, address, "q", connect_timeout=1)
    run = subprocess.run(
        [sys.executable, "-m", "mp_engine", "run", "--root", str(ws.root)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **GIT_ENV},
    )
    assert run.returncode == 2, run.stderr
    assert f"Temporal at {address} is unreachable" in run.stderr
    assert "temporal server start-dev" in run.stderr and "[fleet] temporal" in run.stderr


ROUTED = """# MP-30.4 Routed
Executor: agent

1. [gpu] Write "a" to `out/a.txt`. (after none)
2. Write "b" to `out/b.txt`. (after none)

## Validate

```bash
# MT-001
grep -qx a out/a.txt
```

```bash
# MT-002
grep -qx b out/b.txt
```
"""


def test_a_level_routed_to_its_own_queue_runs_only_on_the_workers_that_serve_it(tmp_path, temporal, daemon_factory):
    from tests.agentutil import add_route
    from tests.fleetutil import toml_table

    fleet = Fleet(tmp_path, temporal, sleep=0.5, max_parallel=2)
    gpu = level("gpu", "good.py", "--log", str(fleet.log))
    add_route(fleet.ws, "gpu", gpu)
    gpu_queue = f"{fleet.queue}-gpu"
    with fleet.ws.config_file.open("a") as f:
        f.write(toml_table("fleet.queues", {"gpu": gpu_queue}))
    try:
        plain = fleet.worker("plain", max_parallel=2)
        scrape = f"127.0.0.1:{free_port()}"
        big = FleetWorker(fleet.tmp, "big", temporal.address, gpu_queue, fleet.url, [gpu], metrics=scrape).start()
        fleet.workers.append(big)
        d = daemon_factory(fleet.ws.root, env=GIT_ENV).start()
        code, out, err = finish(send(fleet.tmp, ROUTED, fleet.url, "--timeout", "120"), timeout=150)
        assert code == 0 and "Certificate: EXACT" in out, err + d.output()[-3000:] + fleet.logs()
        on = {t["mt_id"]: t["workers"] for t in result(fleet.bare)["micro_tasks"]}
        assert on == {"MT-001": [big.identity], "MT-002": [plain.identity]}
        assert "| Ran on |" in out
        # The worker's own metrics (Temporal's SDK): the activity it ran, on its queue.
        import urllib.request

        text = urllib.request.urlopen(f"http://{scrape}/metrics", timeout=10).read().decode()
        ran = [line for line in text.splitlines() if line.startswith("temporal_activity_execution_latency_count")]
        assert any(f'task_queue="{gpu_queue}"' in line and 'activity_type="run_attempt"' in line for line in ran), text
        d.signal(signal.SIGTERM)
        d.wait()
    finally:
        fleet.close()


def test_a_usage_limit_on_one_worker_holds_the_level_fleet_wide_until_its_reset(tmp_path, temporal, daemon_factory):
    fleet = Fleet(tmp_path, temporal, max_parallel=2)
    limited = level(
        "fast",
        "limited.py",
        "--kind",
        "usage",
        "--count",
        str(tmp_path / "n"),
        "--times",
        "1",
        "--reset",
        "4",
        "--log",
        str(fleet.log),
    )
    fleet.level = limited
    try:
        fleet.worker("w1", max_parallel=1)
        fleet.worker("w2", max_parallel=1)
        d = daemon_factory(fleet.ws.root, env=GIT_ENV).start()
        code, out, err = finish(send(fleet.tmp, TWO, fleet.url, "--timeout", "120"), timeout=150)
        assert code == 0 and "Certificate: EXACT" in out, err + d.output()[-3000:] + fleet.logs()
        from mp_engine.core.clock import parse_iso

        # One task, or both (they start together), met the limit: the level waits for its reset.
        paused = [e for e in events(fleet.ws, "micro_task_pause_requested") if e["kind"] == "usage_limit"]
        limits = [e for e in paused if e.get("level_name") == "fast"]  # the level held; then the MP's wait
        assert limits
        resume = min(parse_iso(e["resume_at"]).timestamp() for e in limits)
        first = min(c["t0"] for c in calls(fleet.log))
        later = [c["t0"] for c in calls(fleet.log) if c["t0"] > first + 0.5]
        # After the limit, no worker called that level again before its reset.
        assert later and all(t >= resume - 1.0 for t in later), (later, resume)
        d.signal(signal.SIGTERM)
        d.wait()
    finally:
        fleet.close()
