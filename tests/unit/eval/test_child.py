"""`mp-engine once` as the eval's child: the real pipeline in a process of its own, asked to
checkpoint by a first signal, stopped by a second, and an orphan of a killed eval cleared so
that the run recovers."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.lock import daemon_alive
from mp_engine.core.workspace import Workspace
from mp_engine.eval.checkout import mirror
from mp_engine.eval.child import Children, clear_orphan, run_once
from mp_engine.eval.tasks import Task
from mp_engine.eval.taskspace import overrides, prepare, run_result
from tests.conftest import wait_for
from tests.evalutil import calc_repo, patcher_config


@pytest.fixture
def prepared(tmp_path):
    """A task's workspace whose agent says it started, then works until `go` exists; its
    check never passes, so the run has more to do after the first step (until its 2 iterations)."""
    repo, base = calc_repo(tmp_path / "calc")
    source = tmp_path / "m.git"
    mirror(str(repo), source, base)
    started, go = tmp_path / "started", tmp_path / "go"
    cfg = patcher_config(
        tmp_path / "a.toml", tmp_path, "--touch", str(started), "--wait-for", str(go), max_iterations=2
    )
    task = Task("calc-1", "calc", str(repo), base, "add subtracts", "P", ("t",), checks=("test -e never",))
    ws = tmp_path / "ws"
    prepare(task, source, base, cfg, ws, tmp_path / "prepared.json")
    return ws, overrides(cfg, [tmp_path]), started, go, tmp_path / "logs"


def in_thread(fn, *args):
    box: list = []
    t = threading.Thread(target=lambda: box.append(fn(*args)))
    t.start()
    return t, box


def test_a_run_completes_and_a_first_signal_checkpoints_it_first(prepared):
    ws, env, started, go, logs = prepared
    children = Children()
    t, box = in_thread(run_once, ws, env, logs, children, None)
    wait_for(started.exists, timeout=60, what="the agent to start")
    assert children.checkpoint_all() == 1
    go.touch()  # the running step finishes; then `once` stops, the MP left to resume
    t.join(60)
    assert box[0].exit_code == ExitCode.INTERRUPTED and run_result(ws) is None
    again = run_once(ws, env, logs, children, None)  # resumed: its second iteration, then the end
    assert again.exit_code == ExitCode.MP_ERROR and again.summary.startswith("error MP-1.1"), again
    assert run_result(ws)[1]["micro_tasks"][0]["iterations"] == 2 and children.checkpoint_all() == 0


def test_a_second_signal_stops_it_now(prepared):
    ws, env, started, _go, logs = prepared
    stop_now = threading.Event()
    t, box = in_thread(run_once, ws, env, logs, Children(), stop_now)
    wait_for(started.exists, timeout=60, what="the agent to start")
    stop_now.set()
    t.join(60)
    assert not t.is_alive() and box[0].exit_code != 0 and run_result(ws) is None
    # the agent went with it: `once`'s second signal kills its process group (a SIGKILL of
    # `once` alone left it running, and the next test's machine busier)
    wait_for(lambda: not agents_of(started), timeout=15, what="the agent to be gone")


def agents_of(started) -> list[int]:
    """The fake agents still running for this test (their argv names its `started` file)."""
    import psutil

    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        if str(started) in (p.info["cmdline"] or []) and p.status() != psutil.STATUS_ZOMBIE:
            found.append(p.pid)
    return found


def test_the_once_a_killed_eval_left_behind_is_cleared_and_the_run_recovers(prepared):
    ws, env, started, go, logs = prepared
    orphan = subprocess.Popen(
        [sys.executable, "-m", "mp_engine", "once", "--root", str(ws)],
        env={**os.environ, **env},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(started.exists, timeout=60, what="the orphan's agent to start")
    assert clear_orphan(ws) == orphan.pid
    assert orphan.wait(10) == -9 and not daemon_alive(Workspace.at(ws).daemon_lock_file)
    assert clear_orphan(ws) is None  # nothing left to clear
    go.touch()
    ran = run_once(ws, env, logs, Children(), None)
    assert ran.summary.startswith("error MP-1.1") and run_result(ws) is not None
