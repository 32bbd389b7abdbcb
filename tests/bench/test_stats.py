"""The benchmark suite's arithmetic (the suite itself runs with `make bench`, never in pytest)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.common import Row, Stat, ratio_row, table

ROOT = Path(__file__).resolve().parents[2]


def test_stat_is_median_and_nearest_rank_p95():
    s = Stat.of([float(v) for v in range(1, 101)])
    assert (s.median, s.p95, s.n) == (50.5, 95.0, 100)
    assert Stat.of([3.0]).p95 == 3.0
    assert Stat.of([1.0, 2.0]).scaled(1000).median == 1500.0


def test_ratio_row_meets_its_target_on_medians():
    fast = ratio_row("x", Stat(2.9, 9.0, 5), "floor", Stat(1.0, 1.0, 5), 3.0)
    slow = ratio_row("y", Stat(3.1, 3.1, 5), "floor", Stat(1.0, 1.0, 5), 3.0)
    assert fast.met is True and slow.met is False
    text = table([fast, slow, Row("z", None, "-", None, "<= 20 ms", None, note="not measured")])
    assert "| 2.90x | <= 3x | yes |" in text and "| 3.10x | <= 3x | **no** |" in text
    assert "z (not measured)" in text


def test_bench_cli_lists_its_measurements():
    out = subprocess.run(
        [sys.executable, "-m", "bench", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    for name in ("detect", "git", "poll", "idle", "memory", "bigrepo", "throughput", "startup", "agent"):
        assert name in out.stdout
