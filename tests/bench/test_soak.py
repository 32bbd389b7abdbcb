"""The soak's pure parts (bench/soak/, issue #45): the seeded schedule, what the orchestrator
does about each result, and the invariant checks on made-up files; the whole soak runs in
tests/e2e/test_soak.py."""

from __future__ import annotations

import json
import time
from collections import Counter

from bench.soak import check
from bench.soak.faults import Fault
from bench.soak.ledger import Sent, next_action
from bench.soak.observe import EventTail, HostView, Run, parse_lines, read_ledger
from bench.soak.workload import AGENT, FAULT_WEIGHTS, Kind, schedule
from mp_engine.execute.shell import require_executable
from mp_engine.inbox.mpfile import parse


def test_the_same_seed_gives_the_same_schedule_and_every_kind_is_in_it():
    a, b = schedule(7, 120, 12), schedule(7, 120, 12)
    assert [(j.kind, j.mp_id, j.text, j.route) for j in a.jobs] == [(j.kind, j.mp_id, j.text, j.route) for j in b.jobs]
    assert a.faults == b.faults and schedule(8, 120, 12).jobs != a.jobs
    assert {j.kind for j in a.jobs} == set(Kind) - {Kind.APPROVAL}
    assert set(Counter(f.kind for f in a.faults)) == set(FAULT_WEIGHTS)  # every kind once at least
    agents = {j.index for j in a.jobs if j.kind in AGENT}
    assert all(f.after in agents for f in a.faults if f.kind == "agent_kill")
    short = schedule(45, 24, 7)  # the short soak's (tests/e2e/test_soak.py): every kind, route and fault
    assert {j.kind for j in short.jobs} == set(Kind) - {Kind.APPROVAL}
    assert {j.route for j in short.jobs} == {"orch", "mcp", "cli"}
    assert {f.kind for f in short.faults} == set(FAULT_WEIGHTS)


def test_every_mp_of_a_schedule_is_valid_and_a_duplicate_sends_earlier_bytes():
    sched = schedule(45, 300, 30, fault_kinds={"daemon_kill"})
    for job in sched.jobs:
        mp = parse(job.text.encode())
        if (mp.executor or "shell") == "shell":
            require_executable(mp)
    for job in (j for j in sched.jobs if j.kind == Kind.DUPLICATE):
        assert job.of is not None and sched.jobs[job.of].text == job.text and sched.jobs[job.of].mp_id == job.mp_id
    assert {f.kind for f in sched.faults} == {"daemon_kill"}


def test_what_the_orchestrator_does_about_each_result():
    failing = Sent("MP-1.1", Kind.FAILING, ("ERROR",), "orch")
    failing.lines.append({"status": "ERROR"})
    assert next_action(failing, failing.lines[-1], {"diagnosis": {"kind": "nonzero_exit"}}) == "approve"
    assert failing.done and not failing.unexpected
    asks = Sent("MP-1.2", Kind.QUESTION, ("ERROR", "COMPLETED"), "mcp")
    asks.lines.append({"status": "ERROR"})
    assert next_action(asks, asks.lines[-1], {"answerable": {"mt": "MT-001"}}) == "answer" and not asks.done
    asks.lines.append({"status": "COMPLETED"})
    assert next_action(asks, asks.lines[-1], None) is None and asks.done
    full = Sent("MP-1.4", Kind.QUESTION, ("ERROR", "COMPLETED"), "orch")
    full.lines.append({"status": "ERROR"})  # the disk was full as it started: nothing asked
    assert next_action(full, full.lines[-1], {"diagnosis": {"kind": "disk_full"}}) == "approve"
    assert full.unexpected == ["ERROR disk_full"] and full.done
    quick = Sent("MP-1.3", Kind.QUICK, ("COMPLETED",), "cli")
    quick.lines.append({"status": "ERROR"})
    assert next_action(quick, quick.lines[-1], {"diagnosis": {"kind": "disk_full"}}) == "approve"
    assert quick.unexpected == ["ERROR disk_full"] and quick.done


def sent(mp_id: str, kind: Kind, *statuses: str, expects=("COMPLETED",), at: float = 0.0) -> Sent:
    s = Sent(mp_id, kind, expects, "orch", sent_at=at)
    s.lines = [{"mp_id": mp_id, "status": st, "run_id": f"R-{mp_id}"} for st in statuses]
    s.seen_at = [at + 1.0] * len(statuses)
    return s


def index(*entries: tuple[str, str, str]) -> dict:
    return {(r, st, "t"): {"mp_id": m, "run_id": r, "status": st} for m, r, st in entries}


def test_a_result_missing_on_either_side_is_lost_and_a_second_run_is_double():
    s = {"MP-1.1": sent("MP-1.1", Kind.QUICK, "COMPLETED"), "MP-1.2": sent("MP-1.2", Kind.QUICK, "COMPLETED")}
    remote = index(("MP-1.1", "R1", "COMPLETED"), ("MP-1.2", "R2", "COMPLETED"), ("MP-1.2", "R3", "COMPLETED"))
    host = index(("MP-1.1", "R1", "COMPLETED"))
    out = check.results(s, remote, host)
    assert out["lost"] == ["MP-1.2 (quick) has no result on the host"]
    assert out["double"] == ["MP-1.2 (quick) ran 2 times on the remote: ['R2', 'R3']"]
    pause = {"MP-2.1": sent("MP-2.1", Kind.PAUSE, "ERROR", "COMPLETED", expects=("ERROR", "COMPLETED"))}
    both = index(("MP-2.1", "R4", "ERROR"), ("MP-2.1", "R4", "COMPLETED"))
    assert check.results(pause, both, both) == {"lost": [], "double": []}  # an answered run ends twice


def test_a_full_disk_explains_its_error_and_what_waited_behind_it_nothing_else():
    disk = Fault("disk_full", 3, start=100.0, end=102.0)
    failed = sent("MP-1.4", Kind.QUICK, "ERROR", at=99.0)
    failed.unexpected = ["ERROR disk_full"]
    behind = sent("MP-1.5", Kind.QUICK, "SUPERSEDED", at=99.5)
    behind.unexpected = ["SUPERSEDED"]
    behind.seen_at = [130.0]
    odd = sent("MP-1.6", Kind.QUICK, "ERROR", at=300.0)
    odd.unexpected = ["ERROR engine_error"]
    run = Run("R-MP-1.4", "MP-1.4", started="1970-01-01T00:01:41.000Z", finished="1970-01-01T00:01:41.500Z")
    ok, bad = check.explained({s.mp_id: s for s in (failed, behind, odd)}, {run.run_id: run}, [disk])
    assert len(ok) == 2 and bad == ["MP-1.6 (quick) ended ERROR engine_error, not COMPLETED"]


def test_a_step_runs_once_plus_once_per_recovery_that_reran_it(tmp_path):
    log = tmp_path / "steps.log"
    log.write_text("/ws/SYSTEM/runs/R1 step-001\n/ws/SYSTEM/runs/R1 step-001\n/ws/SYSTEM/runs/R2 step-001\n" * 1)
    runs = {"R1": Run("R1", "MP-1.1"), "R2": Run("R2", "MP-1.2")}
    assert check.steps_twice(log, runs) == ["R1 step-001 ran 2 times (allowed 1)"]
    runs["R1"].retried = {"step-001": 1}
    assert check.steps_twice(log, runs) == []


def test_an_agent_iteration_called_again_needs_a_recovery_a_limit_or_a_kill(tmp_path):
    calls = tmp_path / "calls.jsonl"
    lines = [
        {"run": "R1", "mt": "MT-001", "iteration": 1, "limited": True},
        {"run": "R1", "mt": "MT-001", "iteration": 1, "limited": False},
        {"run": "R2", "mt": "MT-002", "iteration": 2},
        {"run": "R2", "mt": "MT-002", "iteration": 2},
    ]
    calls.write_text("".join(json.dumps(line) + "\n" for line in lines))
    runs = {"R1": Run("R1", "MP-1.1"), "R2": Run("R2", "MP-1.2")}
    assert check.iterations_twice(calls, runs, []) == ["R2 MT-002_iter-002: the agent was called 2 times (allowed 1)"]
    runs["R2"].retried = {"MT-002_iter-002": 1}
    assert check.iterations_twice(calls, runs, []) == []


def test_torn_lines_are_found_but_a_last_line_being_written_is_not(tmp_path):
    torn: list[str] = []
    assert [e["a"] for e in parse_lines('{"a": 1}\n{"a": 2', "f", torn)] == [1] and torn == []
    parse_lines('{"a": 1}\n{"a"\n{"a": 3}\n', "f", torn)
    assert torn == ["f: line 2 does not parse: '{\"a\"'"]


def test_the_host_view_reads_a_ledger_with_its_journal_and_the_event_log_across_rotation(tmp_path):
    run = tmp_path / "SYSTEM/runs/R1"
    run.mkdir(parents=True)
    step = {"step_id": "step-001", "status": "in_progress"}
    ledger = {"journal_gen": 2, "steps": [step], "recoveries": [{"steps_to_retry": ["step-001"]}]}
    (run / "ledger.json").write_text(json.dumps(ledger))
    journal = [{"gen": 1, "step": {**step, "status": "failed"}}, {"gen": 2, "step": {**step, "status": "completed"}}]
    (run / "ledger.journal").write_text("".join(json.dumps(j) + "\n" for j in journal) + '{"gen": 2, "st')
    assert read_ledger(run)["steps"] == [{"step_id": "step-001", "status": "completed"}]
    (run / "result.json").write_text(json.dumps({"mp_id": "MP-1.1", "status": "COMPLETED"}))
    host = HostView(tmp_path)
    host.harvest()
    assert host.runs["R1"].retried == {"step-001": 1} and host.runs["R1"].status == "COMPLETED"
    log = tmp_path / "events.jsonl"
    tail = EventTail(log)
    log.write_text('{"event": "halted", "mp": "MP-1"}\n{"event": "a"}\n')
    tail.read()
    log.rename(tmp_path / "events.jsonl.1")
    with open(tmp_path / "events.jsonl.1", "a") as f:
        f.write('{"event": "a"}\n')  # written before the rotation, read after it
    log.write_text('{"event": "b"}\n{"event": "b"')
    tail.read()
    assert tail.counts == {"halted": 1, "a": 2, "b": 1} and [e["mp"] for e in tail.kept] == ["MP-1"]


def test_nothing_left_behind_means_no_queued_mp_either(tmp_path):
    queue = tmp_path / "queue"
    queue.mkdir()
    (queue / "queue.json").write_text(json.dumps({"entries": [], "commits": ["c1"], "next": 3}))
    assert check.queue_left(queue) == []
    (queue / "queue.json").write_text(json.dumps({"entries": [{"id": "000002"}], "next": 3}))
    (queue / "000002.mp").write_text("# MP-1.1\n")
    assert len(check.queue_left(queue)) == 2


def test_a_run_that_ended_before_the_disk_filled_is_not_explained_by_it():
    assert check.overlaps((1.0, 2.0), (1.5, 3.0)) and not check.overlaps((1.0, 2.0), (2.5, 3.0))
    assert check.overlaps((1.0, None), (time.time(), time.time())) and not check.overlaps((None, 2.0), (0.0, 5.0))


def test_a_git_the_daemon_starts_while_the_checker_looks_is_not_an_orphan(tmp_path, monkeypatch):
    """The short soak reported the daemon's own `git ls-remote` as left behind: it started
    after the checker listed the daemon's children. Its ancestry says whose it is."""
    import subprocess
    from types import SimpleNamespace

    import psutil

    daemon = subprocess.Popen(["sh", "-c", "sleep 30 & wait"], cwd=tmp_path)
    try:
        site = SimpleNamespace(engine=SimpleNamespace(pid=daemon.pid), root=tmp_path, runs_prefix=f"{tmp_path}/runs/")
        check_wait = time.monotonic() + 10
        while not psutil.Process(daemon.pid).children() and time.monotonic() < check_wait:
            time.sleep(0.01)
        monkeypatch.setattr(psutil.Process, "children", lambda self, recursive=False: [])  # listed before it began
        assert check.processes(site) == []
        stray = subprocess.Popen(["sleep", "30"], cwd=tmp_path)  # not the daemon's: reported
        try:
            assert [line.split(" (")[0] for line in check.processes(site)] == [f"process {stray.pid}"]
        finally:
            stray.kill()
            stray.wait()
    finally:
        daemon.kill()
        daemon.wait()
