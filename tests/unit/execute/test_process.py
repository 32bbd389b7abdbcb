"""Running steps: process groups, timeouts, idle timeouts, and a scrubbed environment."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from mp_engine.core.pids import group, proc, proc_stat
from mp_engine.execute.process import kill_stale_group, run_process, scrub_env
from tests.conftest import wait_for


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    info = proc(pid)
    return info is not None and not info.zombie


def _run(tmp_path, script: str, **kw):
    return run_process(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=scrub_env(),
        stdout_path=tmp_path / "out",
        stderr_path=tmp_path / "err",
        kill_grace=kw.pop("kill_grace", 1.0),
        timeout=kw.pop("timeout", 30.0),
        **kw,
    )


def test_output_goes_to_files_and_exit_code_is_kept(tmp_path):
    res = _run(tmp_path, "echo out; echo err >&2; exit 3")
    assert (res.exit_code, res.ok) == (3, False)
    assert (tmp_path / "out").read_text() == "out\n" and (tmp_path / "err").read_text() == "err\n"


def test_timeout_kills_the_whole_process_group(tmp_path):
    # The grandchild ignores SIGTERM, so only the group SIGKILL after the grace ends it.
    res = _run(tmp_path, "(trap '' TERM; sleep 300) & echo $! > child.pid; wait", timeout=0.5, kill_grace=0.3)
    assert res.timed_out and not res.ok
    child = int((tmp_path / "child.pid").read_text())
    # SIGKILL is delivered asynchronously; the group is gone once the kernel has acted.
    wait_for(lambda: not _alive(child), timeout=5, what="the SIGTERM-immune grandchild to die")


def test_idle_timeout_fires_only_without_output(tmp_path):
    res = _run(tmp_path, "echo start; sleep 300", idle_timeout=0.3)
    assert res.idle_timed_out and not res.timed_out
    busy = _run(tmp_path, "for i in 1 2 3 4 5; do echo $i; sleep 0.1; done", idle_timeout=2)
    assert busy.ok and not busy.idle_timed_out


def test_give_up_stops_a_process_whose_output_says_it_cannot_go_on(tmp_path):
    """codex in a sandbox that withholds its endpoint prints "waiting for network" forever
    (issue #44): `give_up` is asked as the output grows, and stops it like a timeout."""
    said = lambda: (tmp_path / "out").read_text().count("waiting") >= 3  # noqa: E731
    res = _run(tmp_path, "while true; do echo waiting; sleep 0.05; done", idle_timeout=30, give_up=said)
    assert res.gave_up and not (res.ok or res.timed_out or res.idle_timed_out) and res.duration < 10
    assert _run(tmp_path, "echo waiting; exit 0", give_up=said).ok  # asked, and it went on


def test_stop_now_interrupts(tmp_path):
    stop = threading.Event()
    stop.set()
    res = _run(tmp_path, "sleep 300", stop_now=stop)
    assert res.interrupted and not res.ok


def test_scrub_env_keeps_only_the_allowlist():
    source = {"PATH": "/bin", "HOME": "/h", "LANG": "C", "AWS_SECRET_ACCESS_KEY": "s", "CI": "1"}
    assert scrub_env(source=source) == {"PATH": "/bin", "HOME": "/h", "LANG": "C"}
    assert scrub_env(allow=["CI"], extra={"MP_ID": "MP-1.0"}, source=source) == {
        "PATH": "/bin",
        "HOME": "/h",
        "LANG": "C",
        "CI": "1",
        "MP_ID": "MP-1.0",
    }


def test_child_sees_the_scrubbed_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SUPER_SECRET", "hunter2")
    res = _run(tmp_path, "env")
    assert res.ok
    assert "hunter2" not in (tmp_path / "out").read_text()


def test_kill_stale_group_kills_a_survivor_but_not_a_reused_pid(tmp_path):
    import subprocess

    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        pgid, started = proc_stat(proc.pid)
        assert kill_stale_group(pgid, started + 3600) == []  # "started later" than it did: not ours
        assert _alive(proc.pid)
        assert kill_stale_group(pgid, started) == [proc.pid]
        proc.wait(timeout=10)
        assert proc.returncode == -9
    finally:
        proc.kill()


def _pidfd_works() -> bool:
    """pidfd_open needs Linux 5.3+ and may be filtered by seccomp; the fallback covers both."""
    try:
        os.close(os.pidfd_open(os.getpid()))
        return True
    except (AttributeError, OSError):
        return False


@pytest.mark.parametrize("mechanism", ["native", "fallback"])
def test_exit_waiter_returns_at_the_exit_and_reaps(mechanism):
    """`ExitWaiter` (pidfd on Linux, kqueue on macOS, `Popen.wait` elsewhere) reports a
    running child as running and an exited one as exited and reaped, exit code included."""
    from mp_engine.execute.process import ExitWaiter

    proc = subprocess.Popen(["sh", "-c", "read line; exit 3"], stdin=subprocess.PIPE)
    waiter = ExitWaiter(proc)
    if mechanism == "fallback":
        waiter._ready = None
    elif sys.platform.startswith("linux") and _pidfd_works():
        assert waiter._ready is not None  # the pidfd path is what runs here
    try:
        assert waiter.wait(0.01) is False and proc.returncode is None  # blocked on stdin
        proc.stdin.close()
        assert waiter.wait(30) is True
        assert proc.returncode == 3
    finally:
        waiter.close()
        if proc.returncode is None:
            proc.kill()
            proc.wait()


def test_groups_left_by_a_run_are_found_by_their_environment_and_killed(tmp_path):
    """An engine killed between spawning a step and recording its group leaves no pgid in
    the ledger; recovery finds the group by the run and step every command step carries in
    its environment, children included, and leaves other runs and steps alone."""
    from mp_engine.execute.process import kill_marked_groups

    env = dict(os.environ)
    ours = subprocess.Popen(
        ["sh", "-c", "sleep 300 & exec sleep 300"],
        env={**env, "MP_RUN_DIR": str(tmp_path / "run-a"), "MP_STEP": "step-002"},
        start_new_session=True,
    )
    other = subprocess.Popen(
        ["sleep", "300"],
        env={**env, "MP_RUN_DIR": str(tmp_path / "run-a-2"), "MP_STEP": "step-002"},
        start_new_session=True,
    )
    done_step = subprocess.Popen(  # an earlier, completed step's background server: kept
        ["sleep", "300"],
        env={**env, "MP_RUN_DIR": str(tmp_path / "run-a"), "MP_STEP": "step-001"},
        start_new_session=True,
    )
    try:
        wait_for(lambda: len(group(ours.pid)) == 2)
        killed = kill_marked_groups([f"MP_RUN_DIR={tmp_path / 'run-a'}", "MP_STEP=step-002"])
        assert ours.pid in killed and len(killed) == 2  # the leader and its background child
        assert ours.wait(timeout=30) == -9
        assert other.poll() is None  # a different run (a longer path, same prefix) is untouched
        assert done_step.poll() is None  # and so is another step of the same run
    finally:
        for p in (ours, other, done_step):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_background_job_ends_with_its_step(tmp_path):
    res = _run(
        tmp_path, "sleep 300 & echo $! > bg.pid; (trap '' TERM; sleep 300) & echo $! > stubborn.pid", kill_grace=0.3
    )
    assert res.ok
    for name in ("bg.pid", "stubborn.pid"):
        pid = int((tmp_path / name).read_text())
        wait_for(lambda pid=pid: not _alive(pid), what=f"{name} to be gone")


def test_a_group_holding_only_a_zombie_of_someone_else_counts_as_ended():
    """codex exits and leaves a `git` child that exits later: re-parented to pid 1 (this
    process being no subreaper), its zombie stays in the group until pid 1 reaps it, and
    `kill(-pgid, 0)` still succeeds. The group is over: stop_group must not wait its grace."""
    from mp_engine.core.pids import is_zombie
    from mp_engine.execute.process import _group_alive

    leader = subprocess.Popen(["sleep", "60"], process_group=0)  # group G, alive
    group = leader.pid
    # C (another group) forks B into G; B exits at once and C never reaps it.
    maker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import os, time\npid = os.fork()\nif pid == 0:\n    os.setpgid(0, {group})\n    os._exit(0)\n"
            "print(pid, flush=True)\ntime.sleep(60)\n",
        ],
        process_group=0,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        zombie = int(maker.stdout.readline())
        wait_for(lambda: is_zombie(zombie), timeout=10)
        assert _group_alive(group)  # the leader still runs
        leader.kill()
        leader.wait()
        os.killpg(group, 0)  # the kernel still counts the group (the zombie is in it)...
        assert proc_stat(zombie)[0] == group and not _group_alive(group)  # ...but nothing runs
    finally:
        for p in (leader, maker):
            p.kill()
            p.wait()
