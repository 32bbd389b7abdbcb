"""`mp-engine logs` reads the host's event log from another process."""

from __future__ import annotations

import json

from tests.conftest import drop
from tests.e2e.cli import mpe


def test_logs_shows_readable_lines_or_the_json_as_written(ws):
    drop(ws, "# MP-7.1\n```bash\ntrue\n```\n")
    assert mpe("once", "--root", str(ws.root)).returncode == 0
    readable = mpe("logs", "--root", str(ws.root), "-n", "50").stdout.splitlines()
    assert any(" mp_completed " in line and "mp=MP-7.1" in line for line in readable)
    raw = mpe("logs", "--root", str(ws.root), "-n", "3", "--json").stdout.splitlines()
    assert len(raw) == 3 and all(json.loads(line)["event"] for line in raw)
    assert json.loads(raw[-1])["event"] == "engine_stopped"
