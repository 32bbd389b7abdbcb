"""The soak's short version (issue #45), so CI keeps `make soak` working: the same harness
(bench/soak/) with 24 MPs of every kind and a fault of every kind, through the real daemon,
a remote behind `git daemon`, the MCP tools, `mp-engine send` and the client's calls. Every
invariant must hold; the figures are the long run's business (bench/SOAK.md). About a
minute alone on 2 CPUs, two on a machine shared with other work: the engine's idle CPU,
what it left behind, are checked at the start and the end only (the long run checks them
between bursts too).
"""

from __future__ import annotations

import pytest

from bench.soak import report
from bench.soak.run import Settings, soak

pytestmark = pytest.mark.daemon

pytest.importorskip("mcp")


def test_a_short_soak_loses_nothing_runs_nothing_twice_and_leaves_nothing_behind(tmp_path):
    settings = Settings(mps=24, seed=45, faults=7, burst=24, depth=4, idle_window=2.0, disk_mb=256, workdir=tmp_path)
    outcome = soak(settings)
    assert outcome.ok, report.markdown(outcome)
    assert outcome.figures["results"] >= settings.mps
    struck = outcome.figures["faults_struck"]
    assert struck["daemon_kill"] and struck["remote_down"] and struck["push_refused"], struck
