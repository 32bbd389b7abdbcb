"""The soak's short version (issue #45), so CI keeps `make soak` working: the same harness
(bench/soak/) with 24 MPs of every kind and a fault of every kind, through the real daemon,
a remote behind `git daemon`, the MCP tools, `mp-engine send` and the client's calls. Every
invariant must hold; the figures are the long run's business (bench/SOAK.md). About a
minute alone on 2 CPUs, two on a machine shared with other work: the engine's idle CPU,
what it left behind, are checked at the start and the end only (the long run checks them
between bursts too).
"""

from __future__ import annotations

import os

import pytest

from bench.soak import report
from bench.soak.run import Settings, soak

pytestmark = pytest.mark.daemon

pytest.importorskip("mcp")


# Held out of `make test` until one failure seen on a loaded host (17:01 on 2026-11-28, its
# report lost before the soak kept one) is found: a test that may fail for a reason nobody
# knows would stop every landing. MP_ENGINE_SOAK_SHORT=1 runs it (README, Operations).
@pytest.mark.skipif(
    not os.environ.get("MP_ENGINE_SOAK_SHORT"),
    reason="the short soak runs with MP_ENGINE_SOAK_SHORT=1 (held out of make test: see its comment)",
)
def test_a_short_soak_loses_nothing_runs_nothing_twice_and_leaves_nothing_behind(tmp_path):
    settings = Settings(mps=24, seed=45, faults=7, burst=24, depth=4, idle_window=2.0, disk_mb=256, workdir=tmp_path)
    outcome = soak(settings)
    assert outcome.ok, report.markdown(outcome)
    assert outcome.figures["results"] >= settings.mps
    struck = outcome.figures["faults_struck"]
    assert struck["daemon_kill"] and struck["remote_down"] and struck["push_refused"], struck
