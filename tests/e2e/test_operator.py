"""Operating the real daemon day to day (issue #15): diagnoses that name the failing
command, a second `run`, cancel, escaped processes, and what `status` says meanwhile."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import drop, events, read_state, wait_for

pytestmark = pytest.mark.daemon


def last_result(ws) -> dict:
    return json.loads((ws.system_dir / "RESULT_last.json").read_text())


def finished(ws, mp_id: str) -> bool:
    try:
        return last_result(ws)["mp_id"] == mp_id and not ws.inbox_file.exists()
    except (OSError, ValueError):
        return False


# (block, kind, what the diagnosis quotes): each MP approves the halt of the one before.
DIAGNOSES = [
    ("echo before\ntest -f missing", "nonzero_exit", "`test -f missing` (line 2 of step 1)"),
    ("echo asking\nread name", "reads_stdin", "`read name` (line 2 of step 1)"),
    ("echo asking\nread answer < /dev/tty", "needs_terminal", "(line 2 of step 1)"),
    ("yes | head -n1", "sigpipe", "`yes | head -n1` (line 1 of step 1)"),
    ("echo a\nmissing-tool-xyz", "command_not_found", "`missing-tool-xyz`"),
    ("echo a\nbash -c 'kill -KILL $$'", "killed", "SIGKILL"),
]


def test_each_diagnosis_names_the_command_that_failed(ws, daemon_factory):
    d = daemon_factory(ws.root).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="ONLINE")
    previous = None
    for n, (body, kind, quoted) in enumerate(DIAGNOSES):
        mp_id = f"MP-8.{n}"
        approves = f"Approves: {previous}\n" if previous else ""
        drop(ws, f"# {mp_id} Case {kind}\n{approves}\n```bash\n{body}\n```\n")
        wait_for(
            lambda mp_id=mp_id: finished(ws, mp_id), what=lambda mp_id=mp_id: f"{mp_id}; log:\n{d.output()[-3000:]}"
        )
        res = last_result(ws)
        assert res["status"] == "ERROR" and res["diagnosis"]["kind"] == kind, res["diagnosis"]
        assert quoted in res["diagnosis"]["text"], res["diagnosis"]["text"]
        assert res["approve_with"] == f"Approves: {mp_id}"
        previous = mp_id
    d.signal(signal.SIGTERM)
    assert d.wait() == 0


def exists(pid: int) -> bool:
    """Running, or a zombie nobody reaped: either way still in /proc."""
    return os.path.exists(f"/proc/{pid}")


def test_no_process_outlives_its_step(ws, daemon_factory):
    d = daemon_factory(ws.root).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="ONLINE")
    drop(
        ws,
        "# MP-8.20 Leftovers\n\n```bash\n"
        "sleep 300 & echo $! > job.pid\n"  # a background job in the step's group
        "setsid sleep 300 & echo $! > setsid.pid\n"  # its own session
        "setsid bash -c 'sleep 2; echo late output' & echo $! > late.pid\n"  # would write into the archive
        "bash -c '(sleep 300 & echo $! > double.pid) &'\n"  # a double fork whose parent exits
        "while [ ! -s double.pid ]; do sleep 0.01; done\n"
        "echo started\n```\n",
    )
    wait_for(lambda: finished(ws, "MP-8.20"), what=lambda: f"MP-8.20; log:\n{d.output()[-3000:]}")
    assert last_result(ws)["status"] == "COMPLETED"
    pids = {name: int((ws.root / f"{name}.pid").read_text()) for name in ("job", "setsid", "late", "double")}
    assert {name: exists(pid) for name, pid in pids.items()} == dict.fromkeys(pids, False)
    stdout = next(ws.runs_dir.glob("*MP-8.20*/steps/step-001.stdout")).read_text()
    assert stdout == "started\n"
    d.signal(signal.SIGTERM)
    assert d.wait() == 0


def cli(ws, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mp_engine", *args, "--root", str(ws.root)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_cancel_on_the_host_stops_the_running_step_and_the_engine_goes_on(ws, daemon_factory):
    d = daemon_factory(ws.root).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="ONLINE")
    drop(
        ws,
        # The step traps SIGTERM: the cancel's SIGKILL follows after at most a second.
        "# MP-8.30 Long\n\n```bash\ntrap '' TERM\necho started\nsleep 60 & echo $! > sleeper.pid\nwait\n```\n\n"
        "```bash\ntouch never\n```\n",
    )
    wait_for(lambda: (ws.root / "sleeper.pid").exists(), what="the step to start")
    out = cli(ws, "cancel")
    assert out.returncode == 0 and "cancelled MP-8.30" in out.stdout, out.stderr
    res = last_result(ws)
    assert res["status"] == "CANCELLED" and res["approve_with"] is None
    assert [s["status"] for s in res["steps"]] == ["cancelled", "not run"]
    assert res["steps"][0]["stdout_tail"] == "started\n"
    assert not exists(int((ws.root / "sleeper.pid").read_text())) and not (ws.root / "never").exists()
    state = read_state(ws)
    assert state["status"] == "ONLINE" and state.get("halt") is None and state["current"] == "IDLE"
    assert "Cancelled at the request of `mp-engine cancel`" in ws.result_file.read_text()
    # No halt: the next MP runs without approval.
    drop(ws, "# MP-8.31 Next\n\n```bash\ntrue\n```\n")
    wait_for(lambda: finished(ws, "MP-8.31"), what="MP-8.31")
    assert last_result(ws)["status"] == "COMPLETED"
    # Nothing to cancel now.
    assert cli(ws, "cancel").returncode == 2
    d.signal(signal.SIGTERM)
    assert d.wait() == 0


def test_a_cancel_request_in_the_inbox_cancels_a_waiting_mp_or_is_ignored(ws, daemon_factory):
    d = daemon_factory(ws.root).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="ONLINE")
    # Naming nothing that runs: consumed, recorded, no result.
    (ws.inbox_dir / "cancel_request.txt").write_text("MP-9.9\n")
    wait_for(lambda: not (ws.inbox_dir / "cancel_request.txt").exists(), what="the request to be consumed")
    ignored = [e for e in events(ws, "cancel_ignored") if e["mp"] == "MP-9.9"]
    assert ignored and "no MP MP-9.9 is running" in ignored[0]["reason"]
    # A request that came before its MP: the MP is cancelled before it starts.
    d.signal(signal.SIGTERM)
    assert d.wait() == 0
    (ws.inbox_dir / "cancel_request.txt").write_text("MP-8.40\n")
    drop(ws, "# MP-8.40 Never\n\n```bash\ntouch ran\n```\n")
    d2 = daemon_factory(ws.root).start()
    wait_for(lambda: finished(ws, "MP-8.40"), what=lambda: f"MP-8.40; log:\n{d2.output()[-3000:]}")
    assert last_result(ws)["status"] == "CANCELLED" and not (ws.root / "ran").exists()
    assert not (ws.inbox_dir / "cancel_request.txt").exists() and read_state(ws)["status"] == "ONLINE"
    d2.signal(signal.SIGTERM)
    assert d2.wait() == 0


def test_status_tells_the_truth_while_a_step_runs_and_after_an_approval(ws, daemon_factory):
    d = daemon_factory(ws.root).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="ONLINE")
    drop(ws, "# MP-8.50 Fails\n\n```bash\nexit 3\n```\n")
    wait_for(lambda: finished(ws, "MP-8.50"), what="MP-8.50")
    assert "last error:" in cli(ws, "status").stdout
    drop(
        ws,
        "# MP-8.51 Slow\nApproves: MP-8.50\nStep-Timeout: 120\n\n"
        "```bash\necho line one\necho 'to stderr' >&2\ntouch up\nsleep 60\n```\n",
    )
    wait_for(lambda: (ws.root / "up").exists(), what="the step to start")
    out = cli(ws, "status").stdout
    assert "current:         MP-8.51, step 1/1 (step-001), running " in out, out
    assert "left before its timeout" in out and "stdout: line one" in out and "stderr: to stderr" in out
    assert "last error:" not in out  # MP-8.50's error was approved by MP-8.51
    report = json.loads(cli(ws, "status", "--json").stdout)
    step = report["step"]
    assert step["id"] == "step-001" and 0 <= step["elapsed"] <= 120 and 0 < step["time_left"] <= 120
    assert report["daemon"]["alive"] is True and report["daemon"]["pid"] == d.pid
    assert cli(ws, "cancel").returncode == 0
    d.signal(signal.SIGTERM)
    assert d.wait() == 0
    out = cli(ws, "status").stdout
    assert "doing:           not running" in out and "daemon:          not running" in out


def test_make_run_on_a_clone_leaves_nothing_untracked(tmp_path, daemon_factory):
    """What `make run` does (the daemon on the repository's own inbox), on a fresh clone."""
    from mp_engine.core.workspace import Workspace
    from tests.conftest import REPO_ROOT

    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout of mp-engine")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO_ROOT), str(clone)], check=True)
    ws = Workspace.at(clone)
    d = daemon_factory(clone).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what=lambda: f"ONLINE; log:\n{d.output()}")
    drop(ws, (clone / "examples/hello.md").read_text())
    wait_for(lambda: finished(ws, "MP-0.1"), what=lambda: f"MP-0.1; log:\n{d.output()[-3000:]}")
    assert last_result(ws)["status"] == "COMPLETED"
    d.signal(signal.SIGTERM)
    assert d.wait() == 0
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout
    assert status.splitlines() == [" M SESSION_STATE.json"], status


def test_status_with_a_config_typo_or_a_config_changed_under_the_daemon(ws, daemon_factory):
    d = daemon_factory(ws.root).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="ONLINE")
    assert "config:" not in cli(ws, "status").stdout
    text = ws.config_file.read_text()
    ws.config_file.write_text(text.replace("step_timeout = 600.0", "step_timout = 60.0"))
    out = cli(ws, "status")
    assert out.returncode == 0 and "step_timout" in out.stdout and "restart it to apply" in out.stdout, out
    assert "status:          ONLINE" in out.stdout  # the state is still shown
    report = json.loads(cli(ws, "status", "--json").stdout)
    assert "step_timout" in report["config_error"] and "restart it to apply" in report["daemon"]["config_changed"]
    ws.config_file.write_text(text)
    assert "config:" not in cli(ws, "status").stdout
    d.signal(signal.SIGTERM)
    assert d.wait() == 0


def test_check_json_is_json_for_a_bad_file_too(tmp_path):
    bad = tmp_path / "bad.md"
    bad.write_text("# MP 1.6 Typo\n\n```bash\ntrue\n```\n")
    out = subprocess.run(
        [sys.executable, "-m", "mp_engine", "check", "--json", str(bad)], capture_output=True, text=True
    )
    doc = json.loads(out.stdout)
    assert out.returncode == 1 and doc["valid"] is False and doc["fix"] == "Write the first line as `# MP-1.6 Typo`."


def test_a_header_typo_does_not_halt_and_the_next_mp_runs_its_python_block(ws, daemon_factory):
    d = daemon_factory(ws.root).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="ONLINE")
    drop(ws, "# MP 1.6 Typo\n\n```bash\ntouch ran\n```\n")
    wait_for(lambda: finished(ws, "UNPARSED"), what=lambda: f"the refusal; log:\n{d.output()[-2000:]}")
    res = last_result(ws)
    assert res["status"] == "REFUSED" and res["approve_with"] is None and "# MP-1.6 Typo" in res["fix"]
    assert read_state(ws)["status"] == "ONLINE" and not (ws.root / "ran").exists()
    drop(ws, "# MP-1.6 Typo fixed\n\n```python\nimport sys\nprint('py', sys.version_info[0])\n```\n")
    wait_for(lambda: finished(ws, "MP-1.6"), what=lambda: f"MP-1.6; log:\n{d.output()[-2000:]}")
    res = last_result(ws)
    assert res["status"] == "COMPLETED" and res["steps"][0]["stdout_tail"] == "py 3\n"
    d.signal(signal.SIGTERM)
    assert d.wait() == 0


def test_a_planted_symlink_cannot_redirect_a_file_block(ws, daemon_factory):
    """Issue #20, item 1, with the real daemon: the config and the state stay the engine's."""
    d = daemon_factory(ws.root).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="ONLINE")
    config = ws.config_file.read_bytes()
    drop(
        ws,
        "# MP-8.60 Plant\n\n```bash\nln -s . here\nln -s .git g\n```\n\n```file here/mp-engine.toml\n[engine]\n```\n",
    )
    wait_for(lambda: finished(ws, "MP-8.60"), what=lambda: f"MP-8.60; log:\n{d.output()[-2000:]}")
    res = last_result(ws)
    assert res["status"] == "ERROR" and res["diagnosis"]["kind"] == "file_refused"
    assert ws.config_file.read_bytes() == config
    drop(ws, "# MP-8.61 Hook\nApproves: MP-8.60\n\n```file g/hooks/post-commit\n#!/bin/sh\necho owned\n```\n")
    wait_for(lambda: finished(ws, "MP-8.61"), what="MP-8.61")
    assert last_result(ws)["diagnosis"]["kind"] == "file_refused" and not (ws.root / ".git/hooks/post-commit").exists()
    drop(ws, "# MP-8.62 Fine\nApproves: MP-8.61\n\n```file src/ok.txt\nok\n```\n")
    wait_for(lambda: finished(ws, "MP-8.62"), what="MP-8.62")
    assert last_result(ws)["status"] == "COMPLETED" and (ws.root / "src/ok.txt").read_text() == "ok\n"
    d.signal(signal.SIGTERM)
    assert d.wait() == 0
