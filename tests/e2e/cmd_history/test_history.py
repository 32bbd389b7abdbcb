"""`mp-engine history` after real runs."""

from __future__ import annotations

import json

from tests.conftest import drop
from tests.e2e.cli import mpe


def test_history_lists_runs_newest_first(ws):
    drop(ws, "# MP-6.1 First\n```bash\ntrue\n```\n")
    assert mpe("once", "--root", str(ws.root)).returncode == 0
    drop(ws, "# MP-6.2 Second\n```bash\ntrue\n```\n")
    assert mpe("once", "--root", str(ws.root)).returncode == 0
    r = mpe("history", "--root", str(ws.root), "-n", "5")
    assert r.returncode == 0
    rows = r.stdout.splitlines()
    assert rows[0].split()[:3] == ["MP", "TITLE", "STATUS"]
    assert [row.split()[0] for row in rows[1:]] == ["MP-6.2", "MP-6.1"]
    data = json.loads(mpe("history", "--root", str(ws.root), "--json", "-n", "1").stdout)
    assert [e["mp_id"] for e in data] == ["MP-6.2"] and data[0]["status"] == "COMPLETED"
