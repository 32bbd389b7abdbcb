"""`mp-engine once`: one pass, and an exit code for each thing a pass can do."""

from __future__ import annotations

import subprocess
import sys

from mp_engine.commands.once import ONCE_EXIT, once
from mp_engine.core.exitcodes import ExitCode
from tests.conftest import drop

HOLD = """
import sys, time
from pathlib import Path
from mp_engine.core.lock import WorkspaceLock
with WorkspaceLock(Path(sys.argv[1]), 5).hold("another engine"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_workspace_held_by_another_engine_exits_busy(ws, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_ENGINE__LOCK_TIMEOUT", "0.3")
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    drop(ws, "# MP-1.0\n```bash\ntrue\n```\n")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(ws.lock_file)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        lines: list[str] = []
        assert once(ws.root, lines.append) == ExitCode.BUSY
        assert lines[0].startswith("busy: the workspace lock") and "another engine" in lines[0]
    finally:
        holder.kill()
        holder.wait()
    assert ws.inbox_file.exists()  # nothing was claimed


def test_every_pass_result_has_an_exit_code():
    assert set(ONCE_EXIT) == {
        "completed",
        "superseded",
        "cancelled",
        "idle",
        "waiting",
        "error",
        "halted",
        "busy",
        "interrupted",
        "failed",
    }
    assert ONCE_EXIT["interrupted"] == ExitCode.INTERRUPTED == 5


def test_once_that_leaves_an_mp_waiting_out_a_usage_limit_records_offline_with_the_wait_kept(ws, tmp_path, monkeypatch):
    from tests.agentutil import ONE, configure, level
    from tests.conftest import read_state

    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    limited = level("limited", "limited.py", "--kind", "usage", "--count", str(tmp_path / "n"), "--reset", "3600")
    configure(ws, [limited])
    drop(ws, ONE)
    lines: list[str] = []
    assert once(ws.root, lines.append) == ExitCode.OK and lines[0].startswith("waiting MP-3.2")
    state = read_state(ws)
    assert state["status"] == "OFFLINE" and state["current"] == "MP-3.2" and state["run_id"]
    assert state["waiting"]["kind"] == "usage_limit" and state["daemon"] is None
    assert not (ws.local_dir / "daemon.owner").exists()  # the daemon lock `once` held is released
