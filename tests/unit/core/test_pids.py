"""Process queries answered by the kernel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from mp_engine.core import pids
from mp_engine.core.pids import children, is_zombie, pid_alive, proc_stat
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
    code = "from mp_engine.core.pids import make_undumpable; print(make_undumpable())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def test_an_undumpable_process_hides_its_environment_from_its_own_user():
    """The boundary itself (issue #20): a process of the same plain user cannot read the
    environment of one that called `make_undumpable`, and can read it of one that did not.
    As root, both run as `nobody` (root reads any process, which README's security section
    says); pids.py is copied where `nobody` can read it, with psutil (its one import
    outside the stdlib; its extension module is abi3, so any CPython 3 loads it)."""
    python = sys.executable
    prefix: list[str] = []
    if os.geteuid() == 0:
        python = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.path.exists(p)), "")
        if not python or not shutil.which("setpriv"):
            pytest.skip("needs setpriv and a system python3 to run as nobody")
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    with tempfile.TemporaryDirectory() as tmp:  # in /tmp itself: pytest's tmp_path is private to root
        shared = Path(tmp)
        shutil.copy(Path(pids.__file__), shared / "pids.py")
        shutil.copytree(Path(psutil.__file__).parent, shared / "psutil")
        for path in (shared, shared / "pids.py", *(shared / "psutil").rglob("*")):
            path.chmod(0o755)
        assert _readable_environ(python, prefix, shared / "pids.py") == {"hide": False, "plain": True}


def _readable_environ(python: str, prefix: list[str], module: Path) -> dict[str, bool]:
    code = (
        "import importlib.util, os, sys, time\n"
        "sys.path.insert(0, os.path.dirname(sys.argv[1]))\n"
        "spec = importlib.util.spec_from_file_location('pids', sys.argv[1])\n"
        "pids = sys.modules['pids'] = importlib.util.module_from_spec(spec); spec.loader.exec_module(pids)\n"
        "print(pids.make_undumpable() if sys.argv[2] == 'hide' else 'plain', flush=True)\n"
        "time.sleep(30)\n"
    )
    readable = {}
    for mode in ("hide", "plain"):
        target = subprocess.Popen(
            [*prefix, python, "-c", code, str(module), mode],
            stdout=subprocess.PIPE,
            text=True,
            env={"PATH": "/usr/bin:/bin", "MARK_SECRET": "s3cr3t-value"},
        )
        try:
            assert target.stdout.readline().strip() in ("True", "plain")
            spy = subprocess.run(
                [
                    *prefix,
                    python,
                    "-c",
                    f"print(open('/proc/{target.pid}/environ', 'rb').read().count(b'MARK_SECRET'))",
                ],
                capture_output=True,
                text=True,
            )
            readable[mode] = spy.stdout.strip() == "1"
            if mode == "hide":
                assert "PermissionError" in spy.stderr, spy.stderr
        finally:
            target.kill()
            target.wait()
    return readable


def test_a_subreaper_gets_the_orphans_of_its_children(tmp_path):
    # In a child interpreter: being a subreaper is for the rest of a process's life.
    code = (
        "import os, subprocess, time\n"
        "from mp_engine.core.pids import become_subreaper, children, is_zombie, environ_has\n"
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
        "while not environ_has(orphan, ['MARK=yes']) and time.monotonic() < deadline: time.sleep(0.01)\n"
        "assert environ_has(orphan, ['MARK=yes']) and not environ_has(orphan, ['MARK=no'])\n"
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


def test_children_come_from_the_kernels_list_and_agree_with_psutil(monkeypatch):
    """The daemon asks before every pass: on Linux the kernel's per-thread list answers
    (psutil reads every process of the host); elsewhere, or without that list, psutil."""
    kids = [subprocess.Popen(["sleep", "5"]) for _ in range(2)]
    try:
        expected = sorted(c.pid for c in psutil.Process(os.getpid()).children())
        assert sorted(pids.children(os.getpid())) == expected and {k.pid for k in kids} <= set(expected)
        monkeypatch.setattr(pids, "_proc_children", lambda pid: None)  # no CONFIG_PROC_CHILDREN
        assert sorted(pids.children(os.getpid())) == expected
        assert pids.children(2**22 + 12345) == []  # no such process
    finally:
        for k in kids:
            k.kill()
            k.wait()


def test_commands_of_this_user_are_found_by_their_words_with_their_environment():
    """`doctor` looks for `mp-engine mcp --http` this way (issue #46)."""
    marker = f"--marker={os.getpid()}"
    env = {**os.environ, "MP_ENGINE_MCP_PUBLIC_URL": "https://mp.example.org"}
    kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "mcp", "--http", marker], env=env)
    try:
        found = {pid: (argv, e) for pid, argv, e in pids.commands_of_user("mcp", "--http", "--marker")}
        argv, e = found[kid.pid]
        assert marker in argv and e["MP_ENGINE_MCP_PUBLIC_URL"] == "https://mp.example.org"
        assert pids.commands_of_user("mcp", "--http", f"--marker={os.getpid()}-not") == []
    finally:
        kid.kill()
        kid.wait()
