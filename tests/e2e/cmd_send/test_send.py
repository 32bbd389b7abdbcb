"""End to end: the real daemon on one side, `mp-engine send` on the other, a real remote
between them (a bare repository over file://, and `git daemon` over TCP on loopback)."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mp_engine.sync.redact import MASK
from tests.conftest import events, read_state, wait_for
from tests.e2e.conftest import GIT_ENV  # re-exported: other e2e tests import it from here
from tests.gitutil import FAILING, HELLO, clone, engine_workspace, git, make_remote, push_mp, remote_file, remote_log

pytestmark = pytest.mark.daemon


def send(tmp_path: Path, text: str, url: str, *extra: str, name: str = "mp.md", wait: bool = True):
    f = tmp_path / name
    f.write_text(text)
    args = [sys.executable, "-m", "mp_engine", "send", str(f), "--repo", url, "--poll", "0.1", "--timeout", "60"]
    return subprocess.Popen(
        [*args, *(["--wait"] if wait else []), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(proc: subprocess.Popen, timeout: float = 90) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def running_on_remote(bare: Path, mp_id: str) -> bool:
    text = remote_file(bare, "SESSION_STATE.json")
    if not text:
        return False
    state = json.loads(text)
    return state["status"] == "RUNNING" and state["current"] == mp_id


def test_send_wait_completed_and_state_on_the_remote(engine, tmp_path):
    bare, url, _ws, d = engine
    code, out, err = finish(send(tmp_path, HELLO, url))
    assert code == 0, err + d.output()
    assert "Status: COMPLETED" in out and "MP: MP-0.1" in out
    state = json.loads(remote_file(bare, "SESSION_STATE.json"))
    assert state["status"] == "ONLINE" and state["last_completed"] == "MP-0.1"
    assert remote_log(bare)[:3] == ["MP-0.1: COMPLETED", "MP-0.1: RUNNING", "MP-0.1: send Hello over git"]


def test_failing_mp_gives_error_then_an_approving_mp_continues(engine, tmp_path):
    bare, url, _ws, d = engine
    code, out, _err = finish(send(tmp_path, FAILING, url))
    assert code == 1 and "Status: ERROR" in out and "Approve-With: Approves: MP-0.2" in out
    assert json.loads(remote_file(bare, "SESSION_STATE.json"))["status"] == "ERROR"
    fix = "# MP-0.3 Corrected\nApproves: MP-0.2\n\n```bash\necho corrected\n```\n"
    code, out, err = finish(send(tmp_path, fix, url, name="fix.md"))
    assert code == 0, err + d.output()
    assert json.loads(remote_file(bare, "SESSION_STATE.json"))["last_completed"] == "MP-0.3"


def test_push_race_both_commits_survive(engine, tmp_path):
    bare, url, _ws, d = engine
    flag = tmp_path / "go"
    mp = f"# MP-0.4 Waits for the test\n\n```bash\nwhile [ ! -e {flag} ]; do sleep 0.05; done\necho done > waited.txt\n```\n"
    proc = send(tmp_path, mp, url)
    wait_for(lambda: running_on_remote(bare, "MP-0.4"), what="RUNNING pushed")
    orch = clone(url, tmp_path / "orch")
    (orch / "plan.md").write_text("the orchestrator's notes\n")
    git(orch, "add", "plan.md")
    git(orch, "commit", "-qm", "orchestrator commit during the run")
    git(orch, "push", "-q", "origin", "HEAD:main")
    flag.touch()
    code, out, err = finish(proc)
    assert code == 0, err + d.output()
    log = remote_log(bare)
    assert log[0] == "MP-0.4: COMPLETED" and "orchestrator commit during the run" in log
    assert remote_file(bare, "plan.md") == "the orchestrator's notes\n"
    assert remote_file(bare, "waited.txt") == "done\n"


def test_an_mp_sent_behind_a_pending_one_is_queued_not_refused(tmp_path):
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    engine_workspace(tmp_path, url)  # no daemon: the first MP stays pending
    assert finish(send(tmp_path, HELLO, url, wait=False))[0] == 0
    code, _out, err = finish(send(tmp_path, HELLO.replace("MP-0.1", "MP-0.9"), url, wait=False, name="b.md"))
    assert code == 0 and "MP-0.1" in err and "waiting in the remote's inbox" in err and "queued behind it" in err
    assert "MP-0.9" in remote_file(bare, "Claude_Inbox/incoming_microproject.txt")
    assert git(bare, "log", "--format=%s", "-2").splitlines() == [
        "MP-0.9: send Hello over git",
        "MP-0.1: send Hello over git",
    ]


def test_send_to_a_halted_engine_is_refused_at_once_unless_it_approves(engine, tmp_path):
    bare, url, _ws, d = engine
    assert finish(send(tmp_path, FAILING, url))[0] == 1
    before = remote_log(bare)
    nxt = "# MP-0.7 Next\n\n```bash\ntrue\n```\n"
    code, _out, err = finish(send(tmp_path, nxt, url, name="next.md"))  # --wait: exits at once anyway
    assert code == 6 and "halted on MP-0.2" in err and "Approves: MP-0.2" in err
    assert remote_log(bare) == before  # nothing sent
    code, _out, err = finish(send(tmp_path, nxt, url, "--force", wait=False, name="next.md"))
    assert code == 0 and remote_log(bare)[0] == "MP-0.7: send Next"
    fix = "# MP-0.8 Fix\nApproves: MP-0.2\n\n```bash\necho fixed\n```\n"
    code, out, err = finish(send(tmp_path, fix, url, name="fix.md"))
    assert code == 0, err + d.output()
    index = [json.loads(line) for line in remote_file(bare, "SYSTEM/results.jsonl").splitlines()]
    assert [(r["mp_id"], r["status"]) for r in index] == [
        ("MP-0.2", "ERROR"),
        ("MP-0.7", "SUPERSEDED"),
        ("MP-0.8", "COMPLETED"),
    ]


def test_send_wait_reports_the_running_mp_and_its_own_progress(engine, tmp_path):
    bare, url, _ws, d = engine
    flag = tmp_path / "go"
    slow = f"# MP-0.5 Slow\n\n```bash\nwhile [ ! -e {flag} ]; do sleep 0.05; done\n```\n"
    first = send(tmp_path, slow, url, name="slow.md")
    wait_for(lambda: running_on_remote(bare, "MP-0.5"), what="MP-0.5 RUNNING on the remote")
    second = send(tmp_path, "# MP-0.6 After\n\n```bash\ntrue\n```\n", url, name="after.md")
    wait_for(lambda: "MP-0.6: send After" in remote_log(bare), what="MP-0.6 sent")
    flag.touch()
    code, out, err = finish(second)
    assert code == 0, err + d.output()
    assert "the engine is running MP-0.5" in err and "queued behind it" in err
    assert "Status: COMPLETED" in out and "MP: MP-0.6" in out
    assert finish(first)[0] == 0


def test_approve_on_the_host_reaches_the_remote(engine, tmp_path):
    bare, url, ws, d = engine
    assert finish(send(tmp_path, FAILING, url))[0] == 1
    assert json.loads(remote_file(bare, "SESSION_STATE.json"))["status"] == "ERROR"
    proc = subprocess.run(
        [sys.executable, "-m", "mp_engine", "approve", "--root", str(ws.root)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    state = json.loads(remote_file(bare, "SESSION_STATE.json"))
    assert state.get("halt") is None and state["status"] == "ONLINE"
    assert remote_log(bare)[0] == "MP-0.2: halt approved on the engine host"


def test_send_refuses_an_invalid_mp_and_sends_nothing(tmp_path):
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    engine_workspace(tmp_path, url)
    code, _out, err = finish(send(tmp_path, "no header here\n", url, wait=False))
    assert code == 1 and "fix:" in err
    assert remote_log(bare) == ["mp-engine: workspace layout"]


def test_a_secret_printed_by_an_mp_reaches_the_remote_only_masked(tmp_path, daemon_factory):
    secret = "s3cr3t-Deploy-Value-9f8e7d"
    gh = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url)
    env = {**GIT_ENV, "DEPLOY_TOKEN": secret, "MP_ENGINE_EXECUTION__ENV_ALLOW": '["DEPLOY_TOKEN"]'}
    d = daemon_factory(ws.root, env=env).start()
    mp = (
        "# MP-0.7 Leaks on purpose\n\n```bash\n"
        'echo "token: $DEPLOY_TOKEN"\nprintf %s "$DEPLOY_TOKEN" | base64\n'
        f'echo "{gh[:4]}""{gh[4:]}"\necho "$DEPLOY_TOKEN" >&2\nexit 3\n```\n'
    )
    code, out, err = finish(send(tmp_path, mp, url))
    assert code == 1, err + d.output()
    assert MASK in out
    encoded = base64.b64encode(secret.encode()).decode()
    pushed = git(bare, "grep", "-I", "-l", "-e", secret, "-e", encoded, "-e", gh, "main", check=False)
    assert pushed == "", f"secret reached the remote in: {pushed}"
    history = git(bare, "log", "-p", "--all")
    assert secret not in history and encoded not in history and gh not in history
    assert MASK in remote_file(bare, "SYSTEM/RESULT_last.md")
    d.signal(signal.SIGTERM)
    d.wait()


# -- a real network transport: git daemon on loopback ---------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GitDaemon:
    """`git daemon --enable=receive-pack` serving `base` on 127.0.0.1:port."""

    def __init__(self, base: Path, port: int):
        self.base, self.port, self.proc = base, port, None

    def start(self) -> GitDaemon:
        self.proc = subprocess.Popen(
            [
                "git",
                "daemon",
                "--reuseaddr",
                "--export-all",
                "--enable=receive-pack",
                "--informative-errors",
                "--listen=127.0.0.1",
                f"--port={self.port}",
                f"--base-path={self.base}",
                str(self.base),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        url = f"git://127.0.0.1:{self.port}/remote.git"
        wait_for(
            lambda: subprocess.run(["git", "ls-remote", url], capture_output=True).returncode == 0,
            what="git daemon serving",
        )
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        self.proc = None


@pytest.fixture
def git_daemon(tmp_path):
    if not Path("/usr/lib/git-core/git-daemon").exists():
        pytest.skip("git daemon is not installed (apt-get install git-daemon-run or git)")
    base = tmp_path / "srv"
    base.mkdir()
    make_remote(base)
    daemon = GitDaemon(base, _free_port()).start()
    yield daemon, base / "remote.git", f"git://127.0.0.1:{daemon.port}/remote.git"
    daemon.stop()


def test_git_daemon_transport_send_wait_completed(git_daemon, tmp_path, daemon_factory):
    _srv, bare, url = git_daemon
    ws = engine_workspace(tmp_path, url)
    d = daemon_factory(ws.root, env=GIT_ENV).start()
    code, out, err = finish(send(tmp_path, HELLO, url))
    assert code == 0, err + d.output()
    assert "Status: COMPLETED" in out
    assert json.loads(remote_file(bare, "SESSION_STATE.json"))["status"] == "ONLINE"
    d.signal(signal.SIGTERM)
    d.wait()


def test_remote_goes_down_mid_run_and_the_result_arrives_when_it_is_back(git_daemon, tmp_path, daemon_factory):
    server, bare, url = git_daemon
    ws = engine_workspace(tmp_path, url)
    d = daemon_factory(ws.root, env=GIT_ENV).start()
    flag = tmp_path / "go"
    mp = f"# MP-0.8 Outlives the remote\n\n```bash\nwhile [ ! -e {flag} ]; do sleep 0.05; done\n```\n"
    proc = send(tmp_path, mp, url)
    wait_for(lambda: running_on_remote(bare, "MP-0.8"), what="RUNNING pushed")
    server.stop()
    flag.touch()
    wait_for(lambda: read_state(ws)["last_completed"] == "MP-0.8", what="MP finished locally")
    wait_for(lambda: events(ws, "sync_unreachable"), what="push failure noticed")
    assert running_on_remote(bare, "MP-0.8")  # the result has not arrived yet
    status = subprocess.run(
        [sys.executable, "-m", "mp_engine", "status", "--root", str(ws.root)], capture_output=True, text=True
    )
    assert "unpushed commit(s)" in status.stdout and " 0 unpushed" not in status.stdout
    server.start()
    code, out, err = finish(proc)
    assert code == 0, err + d.output()
    assert "MP: MP-0.8" in out
    assert remote_log(bare)[0] == "MP-0.8: COMPLETED"
    d.signal(signal.SIGTERM)
    d.wait()


def test_push_mp_helper_and_engine_agree_on_the_inbox_path(tmp_path):
    bare = make_remote(tmp_path)
    engine_workspace(tmp_path, f"file://{bare}")
    orch = clone(f"file://{bare}", tmp_path / "orch")
    push_mp(orch, HELLO)
    assert remote_file(bare, "Claude_Inbox/incoming_microproject.txt") == HELLO


def test_the_git_poll_keeps_its_own_timer_when_rescans_are_rare(tmp_path, daemon_factory):
    # Rescan every 60 s, poll the remote every 0.2 s: the pushed MP must not wait for a rescan.
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url)
    env = {**GIT_ENV, "MP_ENGINE_ENGINE__POLL_INTERVAL": "60", "MP_ENGINE_WATCH__HEALTH_INTERVAL": "60"}
    d = daemon_factory(ws.root, env=env).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="engine ONLINE")
    push_mp(clone(url, tmp_path / "orch"), HELLO)
    wait_for(lambda: read_state(ws)["last_completed"] == "MP-0.1", timeout=20, what=lambda: d.output())
    d.signal(signal.SIGTERM)
    assert d.wait() == 0


def test_send_cancel_stops_the_running_mp_over_git(engine, tmp_path):
    bare, url, ws, d = engine
    long_mp = "# MP-0.30 Long\n\n```bash\necho started\nsleep 60\n```\n"
    sender = send(tmp_path, long_mp, url)
    wait_for(lambda: running_on_remote(bare, "MP-0.30"), what=lambda: f"RUNNING on the remote; log:\n{d.output()}")
    args = ["send", "--cancel", "MP-0.30", "--repo", url, "--wait", "--poll", "0.1", "--timeout", "60"]
    code, out, err = finish(
        subprocess.Popen(
            [sys.executable, "-m", "mp_engine", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    )
    assert code == 0, err + d.output()
    assert "Status: CANCELLED" in out and "MP: MP-0.30" in out
    # The sender of the MP sees the same result; CANCELLED is not COMPLETED for it.
    code, out, _ = finish(sender)
    assert code == 1 and "Status: CANCELLED" in out
    state = json.loads(remote_file(bare, "SESSION_STATE.json"))
    assert state["status"] == "ONLINE" and state.get("halt") is None
    # The request was consumed, and its removal reached the remote.
    wait_for(
        lambda: remote_file(bare, "Claude_Inbox/cancel_request.txt") is None, what="the request removed on the remote"
    )
    assert [e["source"] for e in events(ws, "mp_cancelled")] == ["remote"]
    # A cancel for an MP that is not there: sent, then recorded as ignored.
    args = ["send", "--cancel", "MP-0.99", "--repo", url]
    code, out, err = finish(
        subprocess.Popen(
            [sys.executable, "-m", "mp_engine", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    )
    assert code == 0 and "neither running nor waiting" in err
    wait_for(
        lambda: any(e["mp"] == "MP-0.99" for e in events(ws, "cancel_ignored")), what="the ignored request recorded"
    )
    wait_for(lambda: remote_file(bare, "Claude_Inbox/cancel_request.txt") is None, what="the ignored request removed")


def test_the_remote_tells_an_engine_that_is_down_from_one_that_is_idle(tmp_path, daemon_factory):
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url)
    env = {**GIT_ENV, "MP_ENGINE_GIT__HEARTBEAT_INTERVAL": "0.5"}

    def remote_status() -> dict:
        args = [sys.executable, "-m", "mp_engine", "status", "--remote", url, "--json"]
        out = subprocess.run(args, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    assert remote_status()["engine"]["engine"] == "unknown"  # never started: no heartbeat yet
    d = daemon_factory(ws.root, env=env).start()
    wait_for(lambda: remote_status()["engine"]["engine"] == "up", what=lambda: f"heartbeat; log:\n{d.output()}")
    before = remote_log(bare)
    first = remote_status()["engine"]["last_beat"]
    wait_for(lambda: remote_status()["engine"]["last_beat"] != first, what="a later beat")
    assert remote_log(bare) == before  # beats never land on the channel branch
    d.signal(signal.SIGTERM)
    assert d.wait() == 0
    assert remote_status()["engine"]["engine"] == "stopped"
    d2 = daemon_factory(ws.root, env=env).start()
    wait_for(lambda: remote_status()["engine"]["engine"] == "up", what="up again")
    d2.kill9()
    wait_for(lambda: remote_status()["engine"]["engine"] == "silent", timeout=30, what="the beats to stop")
    plain = subprocess.run(
        [sys.executable, "-m", "mp_engine", "status", "--remote", url], capture_output=True, text=True, timeout=60
    )
    assert "engine:   silent" in plain.stdout and "no heartbeat for" in plain.stdout
