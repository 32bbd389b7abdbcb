"""`mp-engine doctor` in a real process: one line per check, exit 1 on a failure."""

from __future__ import annotations

from tests.e2e.cli import mpe


def test_a_fresh_workspace_passes(ws):
    r = mpe("doctor", "--root", str(ws.root))
    assert r.returncode == 0, r.stdout
    lines = r.stdout.splitlines()
    assert lines[-1].startswith(f"{len(lines) - 1} checks: 0 failed")
    assert all(line.startswith(("[ok  ]", "[warn]")) for line in lines[:-1])


def test_a_damaged_state_file_fails_with_the_fix(ws):
    ws.state_file.write_text("{")
    r = mpe("doctor", "--root", str(ws.root))
    assert r.returncode == 1
    failed = [line for line in r.stdout.splitlines() if line.startswith("[FAIL]")]
    assert failed and "state:" in failed[0] and "-- fix: restore SESSION_STATE.json from git" in failed[0]
