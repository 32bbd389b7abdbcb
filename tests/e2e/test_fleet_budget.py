"""The engine's budgets over a fleet (issue #42), through real parts: a Temporal dev server,
two `mp-engine worker` processes, the engine daemon, a fake agent that costs $0.30 a call.
The workers' calls together cross `[agent] daily_cost_usd`: every one of them is charged
once to the engine's one spend log, and no new call starts on any worker; the MP waits for
the reset."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.agentutil import calls, configure, level, planner
from tests.conftest import read_state, wait_for
from tests.e2e.cmd_send.test_send import GIT_ENV, send
from tests.e2e.test_fleet import SIX, SIX_PLAN
from tests.fleetutil import FleetWorker, TemporalServer, add_fleet
from tests.gitutil import engine_workspace, make_remote

pytestmark = pytest.mark.daemon


@pytest.fixture(scope="module")
def temporal(tmp_path_factory) -> Iterator[TemporalServer]:
    server = TemporalServer(tmp_path_factory.mktemp("temporal")).start()
    yield server
    server.close()


def test_a_budget_crossed_by_the_workers_together_stops_new_calls_on_all_of_them(tmp_path, temporal, daemon_factory):
    bare = make_remote(tmp_path)
    url, queue, log = f"file://{bare}", f"q-{os.getpid()}-budget", tmp_path / "calls.jsonl"
    paid = level("paid", "good.py", "--log", str(log), "--sleep", "1", "--cost", "0.3")
    ws = engine_workspace(tmp_path, url)
    configure(
        ws,
        [paid],
        planner=planner(tmp_path / "answers", SIX_PLAN),
        land="branch",
        max_parallel=2,
        daily_cost_usd=1.0,
        budget_clock="UTC",
    )
    add_fleet(ws, temporal.address, queue)
    workers = [FleetWorker(tmp_path, n, temporal.address, queue, url, [paid], max_parallel=1).start() for n in "ab"]
    try:
        d = daemon_factory(ws.root, env=GIT_ENV).start()
        sender = send(tmp_path, SIX, url, wait=False)
        sender.communicate(timeout=60)
        logs = lambda: d.output()[-4000:] + "".join(w.output()[-2000:] for w in workers)  # noqa: E731
        wait_for(lambda: (read_state(ws).get("waiting") or {}).get("kind") == "budget", timeout=150, what=logs)
        made = calls(log)
        # $0.30 a call, $1.00 a day: calls start while less than $1.00 is spent ($0, 0.30,
        # 0.60, 0.90), and one more may already run beside the fourth.
        assert 4 <= len(made) <= 5, made
        ran_on = {Path(c["cwd"]).parts[len(tmp_path.parts)] for c in made}
        assert ran_on == {"worker-a", "worker-b"}  # both workers' calls, one budget
        spent = [json.loads(line) for line in (ws.local_dir / "agent_spend.log").read_text().splitlines()]
        charges = [r for r in spent if "usd" in r]
        assert len(charges) == len(made) and round(sum(r["usd"] for r in charges), 6) == round(0.3 * len(made), 6)
        assert len({r["key"] for r in charges}) == len(charges)  # each call once
        assert [r["alerted"] for r in spent if "alerted" in r] == [f"day:{datetime.now(UTC).date().isoformat()}"]
        d.signal(signal.SIGTERM)
        d.wait(60)
        assert len(calls(log)) == len(made)  # nothing started after the budget was spent
    finally:
        for w in workers:
            w.close()
