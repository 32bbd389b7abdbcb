"""Operating the real daemon day to day (issue #15): diagnoses that name the failing
command, a second `run`, cancel, escaped processes, and what `status` says meanwhile."""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.conftest import drop, read_state, wait_for

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
