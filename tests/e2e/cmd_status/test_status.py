"""`mp-engine status` from another process: plain text off a TTY, JSON on request."""

from __future__ import annotations

import json

from tests.conftest import drop
from tests.e2e.cli import mpe


def test_status_after_a_failure_shows_the_halt_and_how_to_lift_it(ws):
    drop(ws, "# MP-5.1 Breaks\n```bash\nfalse\n```\n")
    assert mpe("once", "--root", str(ws.root)).returncode == 1
    plain = mpe("status", "--root", str(ws.root))
    assert plain.returncode == 0 and "\x1b[" not in plain.stdout  # no colour off a terminal
    assert "halted: MP-5.1 ERROR awaiting approval" in plain.stdout
    data = json.loads(mpe("status", "--root", str(ws.root), "--json").stdout)
    assert data["halt"]["mp_id"] == "MP-5.1"
    assert data["halt"]["lift_with"][0] == "an MP whose header has `Approves: MP-5.1`"
    assert data["last_error"]["event"] == "mp_failed"


def test_status_of_a_directory_that_is_no_workspace_is_a_usage_error(tmp_path):
    r = mpe("status", "--root", str(tmp_path))
    assert r.returncode == 2 and "mp-engine init" in r.stderr and r.stdout == ""
