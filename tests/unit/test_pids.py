"""Process queries answered by the kernel."""

from __future__ import annotations

import os
import subprocess
import sys

from mp_engine.pids import children, is_zombie, pid_alive, proc_stat
from tests.conftest import dead_pid


def test_pid_alive():
    assert pid_alive(os.getpid())
    assert not pid_alive(dead_pid())
    assert not pid_alive(None) and not pid_alive(0) and not pid_alive("12")
    assert pid_alive(1)  # another user's process counts as alive


def test_proc_stat_gives_the_group_and_a_start_time_that_tells_reuse_apart():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        pgid, started = proc_stat(child.pid)
        assert pgid == child.pid and started > 0
        assert proc_stat(child.pid) == (pgid, started)  # stable for the same process
    finally:
        child.kill()
        child.wait()
    assert proc_stat(child.pid) is None


def test_a_process_can_make_itself_undumpable(tmp_path):
    """In a child (the flag is per process and cannot be undone for this test run)."""
    import subprocess
    import sys

    code = "from mp_engine.pids import make_undumpable; print(make_undumpable())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def test_a_subreaper_gets_the_orphans_of_its_children(tmp_path):
    # In a child interpreter: being a subreaper is for the rest of a process's life.
    code = (
        "import os, subprocess, time\n"
        "from mp_engine.pids import become_subreaper, children, is_zombie, environ_has\n"
        "assert become_subreaper()\n"
        "subprocess.run(['bash', '-c', 'MARK=yes setsid sleep 30 </dev/null >/dev/null 2>&1 & echo $! > orphan.pid'],"
        " check=True)\n"
        "orphan = int(open('orphan.pid').read())\n"
        "try:\n"
        "    assert orphan in children(os.getpid()), (orphan, children(os.getpid()))\n"
        "except AssertionError:\n"
        "    os.kill(orphan, 9)\n"
        "    raise\n"
        "deadline = time.monotonic() + 10\n"  # the environment is the command's once it has exec'd
        "while not environ_has(orphan, [b'MARK=yes']) and time.monotonic() < deadline: time.sleep(0.01)\n"
        "assert environ_has(orphan, [b'MARK=yes']) and not environ_has(orphan, [b'MARK=no'])\n"
        "os.kill(orphan, 9)\n"
        "deadline = time.monotonic() + 10\n"  # SIGKILL is delivered asynchronously
        "while not is_zombie(orphan) and time.monotonic() < deadline: time.sleep(0.01)\n"
        "assert is_zombie(orphan)\n"
        "os.waitpid(orphan, 0)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert out.stdout == "ok\n", out.stderr


def test_children_of_a_missing_process_are_none():
    assert children(dead_pid()) == [] and not is_zombie(dead_pid())
