"""Process queries answered by the kernel."""

from __future__ import annotations

import os
import subprocess
import sys

from mp_engine.pids import pid_alive, proc_stat
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
