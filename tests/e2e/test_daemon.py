"""The real daemon (`python -m mp_engine run`) as a subprocess: the MP-1.3 loop end to end,
signals, two daemons on one root, and `kill -9` at the worst moment."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from tests.conftest import drop, events, read_state, result_field, wait_for

pytestmark = pytest.mark.daemon


def online(ws, pid: int) -> bool:
    state = read_state(ws)
    return state["status"] == "ONLINE" and (state.get("daemon") or {}).get("pid") == pid


def test_drop_and_result(ws, daemon_factory):
    d = daemon_factory(ws.root).start()
    wait_for(lambda: online(ws, d.pid), what=f"the daemon to go ONLINE; log:\n{d.output()}")
    drop(ws, "# MP-1.0 Hello\n\n```file hello.txt\nhi\n```\n\n```bash\ncat hello.txt\n```\n")
    # The state is written before the inbox file is deleted: wait for both.
    wait_for(
        lambda: read_state(ws)["last_completed"] == "MP-1.0" and not ws.inbox_file.exists(),
        what="MP-1.0 to complete and leave the inbox",
    )
    assert result_field(ws, "Status") == "COMPLETED"
    d.signal(signal.SIGTERM)
    assert d.wait() == 0
    state = read_state(ws)
    assert state["status"] == "OFFLINE" and state["current"] == "IDLE"
    # Off a TTY the log is JSON lines, one object per event.
    logged = [json.loads(line) for line in d.output().splitlines() if line.strip()]
    assert {"mp_claimed", "mp_completed", "engine_stopped"} <= {rec["event"] for rec in logged}
    # The daemon made itself non-dumpable: its /proc/<pid>/environ is closed to steps.
    assert [r["undumpable"] for r in logged if r["event"] == "process_hardened"] == [True]
    assert all("level" in rec and "timestamp" in rec for rec in logged)


def test_error_halt_and_approval(ws, daemon_factory):
    d = daemon_factory(ws.root).start()
    wait_for(lambda: online(ws, d.pid), what="ONLINE")
    drop(ws, "# MP-2.0\n\n```bash\nexit 3\n```\n")
    wait_for(lambda: read_state(ws)["status"] == "ERROR", what="ERROR")
    assert result_field(ws, "Error-Kind") == "nonzero_exit"
    drop(ws, "# MP-2.1\n\n```bash\ntouch held.txt\n```\n")
    wait_for(lambda: events(ws, "mp_held"), what="the new MP to be held")
    assert not (ws.root / "held.txt").exists() and ws.inbox_file.exists()
    # The orchestrator approves in-band: the same MP, now with `Approves:`.
    drop(ws, "# MP-2.1\nApproves: MP-2.0\n\n```bash\ntouch approved.txt\n```\n")
    wait_for(lambda: read_state(ws)["last_completed"] == "MP-2.1", what="the approving MP to run")
    assert (ws.root / "approved.txt").exists() and read_state(ws)["status"] == "ONLINE"
    # And locally, with `mp-engine approve` while the daemon runs.
    drop(ws, "# MP-2.2\n\n```bash\nexit 1\n```\n")
    wait_for(lambda: read_state(ws)["status"] == "ERROR", what="second ERROR")
    approve = subprocess.run(
        [sys.executable, "-m", "mp_engine", "approve", "--root", str(ws.root)], capture_output=True, text=True
    )
    assert approve.returncode == 0, approve.stderr
    assert read_state(ws)["status"] == "ONLINE"
    drop(ws, "# MP-2.3\n\n```bash\ntrue\n```\n")
    wait_for(lambda: read_state(ws)["last_completed"] == "MP-2.3", what="MP-2.3 after local approval")


def test_a_second_daemon_on_one_root_exits_4_at_once_naming_the_first(ws, daemon_factory):
    a = daemon_factory(ws.root, name="a").start()
    wait_for(lambda: online(ws, a.pid), what=lambda: f"the first daemon ONLINE; log:\n{a.output()}")
    b = daemon_factory(ws.root, name="b").start()
    assert b.wait() == 4
    assert f"another mp-engine daemon already runs on this workspace (pid {a.pid}" in b.output()
    assert online(ws, a.pid)  # the second one recorded nothing
    # One `once` beside the daemon is serialised by the workspace lock: each MP runs once.
    for n in range(3):
        drop(ws, f"# MP-3.{n}\n\n```bash\necho $$ >> ran.txt\nsleep 0.3\n```\n")
        once = subprocess.Popen([sys.executable, "-m", "mp_engine", "once", "--root", str(ws.root)])
        wait_for(
            lambda n=n: read_state(ws)["last_completed"] == f"MP-3.{n}",
            what=lambda n=n: f"MP-3.{n}; state {read_state(ws)}; log:\n{a.output()}",
        )
        assert once.wait(timeout=30) in (0, 4)
    assert len((ws.root / "ran.txt").read_text().splitlines()) == 3
    assert len(events(ws, "mp_claimed")) == 3
    a.signal(signal.SIGTERM)
    assert a.wait() == 0
    assert read_state(ws)["status"] == "OFFLINE"


def test_sigterm_during_a_step_checkpoints_and_the_restart_resumes(ws, daemon_factory):
    mp = (
        "# MP-4.0\n\n```bash\necho first >> log.txt\n```\n\n"
        "```bash\ntouch step2.started\nsleep 1\necho second >> log.txt\n```\n\n"
        "```bash\necho third >> log.txt\n```\n"
    )
    d = daemon_factory(ws.root).start()
    wait_for(lambda: online(ws, d.pid), what="ONLINE")
    drop(ws, mp)
    wait_for(lambda: (ws.root / "step2.started").exists(), what="step 2 to start")
    d.signal(signal.SIGTERM)  # first signal: let step 2 finish, then stop
    assert d.wait() == 0
    assert (ws.root / "log.txt").read_text().splitlines() == ["first", "second"]
    state = read_state(ws)
    assert state["status"] == "OFFLINE" and state["run_id"] and state["current"] == "MP-4.0"
    assert events(ws, "mp_checkpointed")[-1]["resume_point"] == "step-003"

    d2 = daemon_factory(ws.root).start()
    wait_for(lambda: read_state(ws)["last_completed"] == "MP-4.0", what="the MP to finish after restart")
    assert (ws.root / "log.txt").read_text().splitlines() == ["first", "second", "third"]
    assert result_field(ws, "Status") == "COMPLETED"
    d2.signal(signal.SIGTERM)
    d2.wait()


def test_second_sigterm_stops_at_once(ws, daemon_factory):
    d = daemon_factory(ws.root).start()
    wait_for(lambda: online(ws, d.pid), what="ONLINE")
    drop(ws, "# MP-4.1\n\n```bash\ntouch started\nsleep 300\n```\n\n```bash\ntrue\n```\n")
    wait_for(lambda: (ws.root / "started").exists(), what="the long step to start")
    d.signal(signal.SIGTERM)
    wait_for(lambda: events(ws, "stop_requested"), what="the first stop request to be noted")
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=30) == 0
    state = read_state(ws)
    assert state["run_id"] and state["current"] == "MP-4.1"  # resumable, not failed


def test_kill9_mid_step_then_restart_loses_nothing(ws, daemon_factory):
    mp = (
        "# MP-5.0 Crash test\n\n```bash\necho one >> log.txt\n```\n\n"
        "```bash\necho two-start >> log.txt\nsleep 300\n```\n"
    )
    # On restart the interrupted step is re-run (the default); make the rerun quick.
    d = daemon_factory(ws.root).start()
    wait_for(lambda: online(ws, d.pid), what="ONLINE")
    drop(ws, mp)
    wait_for(lambda: "two-start" in ((ws.root / "log.txt").read_text() if (ws.root / "log.txt").exists() else ""))
    assert read_state(ws)["status"] == "RUNNING"
    d.kill9()
    # The orphaned `sleep 300` group is still running; the restart must kill it.
    d2 = daemon_factory(ws.root, env={"MP_ENGINE_EXECUTION__STEP_TIMEOUT": "1"}).start()
    wait_for(lambda: read_state(ws)["status"] == "ERROR", what="the MP to end after restart")
    rec = events(ws, "recovery")[-1]
    assert rec["mp"] == "MP-5.0" and rec["steps_to_retry"] == ["step-002"] and rec["resume_point"] == "step-002"
    assert rec.get("killed_pids"), "the orphaned step group must be killed"
    lines = (ws.root / "log.txt").read_text().splitlines()
    assert lines.count("one") == 1  # the completed step was not re-run
    assert lines.count("two-start") == 2  # the interrupted one was, per policy
    assert result_field(ws, "Error-Kind") == "timeout" and result_field(ws, "Failed-At") == "step-002"
    d2.signal(signal.SIGTERM)
    d2.wait()


def test_kill9_with_report_policy_reports_the_interrupted_step(ws, daemon_factory):
    d = daemon_factory(ws.root).start()
    wait_for(lambda: online(ws, d.pid), what="ONLINE")
    drop(ws, "# MP-5.1\n\n```bash\ntouch started\nsleep 300\n```\n")
    wait_for(lambda: (ws.root / "started").exists(), what="the step to start")
    d.kill9()
    d2 = daemon_factory(ws.root, env={"MP_ENGINE_RECOVERY__INTERRUPTED_STEP": "report"}).start()
    wait_for(lambda: read_state(ws)["status"] == "ERROR", what="the MP to end in ERROR")
    assert result_field(ws, "Error-Kind") == "interrupted"
    d2.signal(signal.SIGTERM)
    d2.wait()


def test_an_mp_overwritten_while_another_runs_gets_a_superseded_result(ws, daemon_factory, tmp_path):
    """MP-13.2 dropped while MP-13.1 runs, then replaced by MP-13.3 before the engine was
    free: 13.2 does not vanish, it ends SUPERSEDED; 13.3 runs; nothing halts (issue #14)."""
    release = tmp_path / "release"
    d = daemon_factory(ws.root).start()
    wait_for(lambda: online(ws, d.pid), what="ONLINE")
    drop(ws, f"# MP-13.1 Slow\n\n```bash\nwhile [ ! -e {release} ]; do sleep 0.05; done\n```\n")
    wait_for(lambda: read_state(ws)["status"] == "RUNNING", what="MP-13.1 to run")
    drop(ws, "# MP-13.2 Replaced\n\n```bash\ntouch should-not-run\n```\n")
    queue = ws.local_dir / "queue" / "queue.json"
    wait_for(lambda: queue.exists() and json.loads(queue.read_text())["entries"], what="MP-13.2 to be queued")
    drop(ws, "# MP-13.3 Newest\n\n```bash\ntouch newest-ran\n```\n")
    release.touch()
    wait_for(lambda: (read_state(ws).get("last_result") or {}).get("mp_id") == "MP-13.3", what="MP-13.3's result")
    statuses = {}
    for run in ws.runs_dir.iterdir():
        if run.is_dir():
            data = json.loads((run / "result.json").read_text())
            statuses[data["mp_id"]] = data["status"]
    assert statuses == {"MP-13.1": "COMPLETED", "MP-13.2": "SUPERSEDED", "MP-13.3": "COMPLETED"}
    assert (ws.root / "newest-ran").exists() and not (ws.root / "should-not-run").exists()
    superseded = events(ws, "mp_superseded")
    assert [e["mp"] for e in superseded] == ["MP-13.2"] and "replaced" in superseded[0]["reason"]
    state = read_state(ws)
    assert state["status"] == "ONLINE" and state.get("halt") is None and not ws.inbox_file.exists()
    assert state["last_result"]["mp_sha256"] and not json.loads(queue.read_text())["entries"]


def test_after_kill_9_status_and_doctor_say_the_daemon_is_down(ws, daemon_factory):
    """A dead engine must not look alive (issue #15): the state still says ONLINE, but
    status shows the daemon DOWN and doctor fails, each with what to do."""
    from tests.e2e.cli import mpe

    before = json.loads(mpe("status", "--root", str(ws.root), "--json").stdout)["daemon"]
    assert before["alive"] is False
    assert "daemon:          not running" in mpe("status", "--root", str(ws.root)).stdout
    d = daemon_factory(ws.root).start()
    wait_for(lambda: online(ws, d.pid), what="ONLINE")
    out = mpe("status", "--root", str(ws.root)).stdout
    assert "DOWN" not in out and f"daemon:          running (pid {d.pid}," in out
    assert json.loads(mpe("status", "--root", str(ws.root), "--json").stdout)["daemon"]["alive"] is True
    assert f"daemon running: pid {d.pid}" in mpe("doctor", "--root", str(ws.root)).stdout
    d.signal(signal.SIGKILL)
    d.wait()
    assert read_state(ws)["status"] == "ONLINE"  # what the file says after a kill -9
    out = mpe("status", "--root", str(ws.root)).stdout
    assert "status:          OFFLINE (not running (last seen" in out and "the state file still says ONLINE" in out
    assert "daemon:          DOWN" in out and "idle" not in out, out
    report = json.loads(mpe("status", "--root", str(ws.root), "--json").stdout)
    assert report["daemon"]["alive"] is False and report["daemon"]["last_pid"] == d.pid
    doctor = mpe("doctor", "--root", str(ws.root))
    assert doctor.returncode == 1 and "is not running: it crashed or was killed" in doctor.stdout
