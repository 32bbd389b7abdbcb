"""`mp-engine approve` on the engine host, between two real passes."""

from __future__ import annotations

from tests.conftest import drop, read_state
from tests.e2e.cli import mpe


def test_approve_lifts_the_halt_so_the_next_mp_runs(ws):
    drop(ws, "# MP-8.1\n```bash\nexit 1\n```\n")
    assert mpe("once", "--root", str(ws.root)).returncode == 1
    drop(ws, "# MP-8.2\n```bash\ntrue\n```\n")
    assert mpe("once", "--root", str(ws.root)).returncode == 3
    r = mpe("approve", "--root", str(ws.root))
    assert r.returncode == 0 and r.stdout.strip() == "approved: the halt on MP-8.1 is lifted"
    assert mpe("once", "--root", str(ws.root)).returncode == 0
    assert read_state(ws)["last_completed"] == "MP-8.2"
    again = mpe("approve", "--root", str(ws.root))
    assert again.returncode == 0 and "nothing to approve" in again.stdout
