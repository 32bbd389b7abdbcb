"""4. Idle cost: the daemon's CPU and wake-ups while nothing happens.

The real daemon runs idle for N seconds, once with git polling at the default interval
against a local bare remote and once with git off. CPU counts the daemon and its reaped
git children (/proc/<pid>/stat); wake-ups are voluntary context switches summed over
all its threads. Target: under 0.5% of one core. With git off, the only periodic
wake-ups should be the rescan timer ([engine] poll_interval).
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import PYTHON, Daemon, Row, Stat, context_switches, cpu_seconds, engine_env, init_workspace
from bench.gitcost import seed_remote


def _idle(ws: Path, env: dict[str, str], seconds: float, log: Path) -> tuple[float, float]:
    daemon = Daemon(ws, env, log)
    try:
        daemon.wait_online()
        time.sleep(2.0)  # start-up work done
        c0, w0, t0 = cpu_seconds(daemon.pid), context_switches(daemon.pid), time.monotonic()
        time.sleep(seconds)
        c1, w1, t1 = cpu_seconds(daemon.pid), context_switches(daemon.pid), time.monotonic()
    finally:
        daemon.stop()
    return (c1 - c0) / (t1 - t0) * 100, (w1 - w0) / (t1 - t0)


def run(seconds: int) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="mpe-bench-idle-") as d:
        base = Path(d)
        env = engine_env(base)
        url = seed_remote(base, "idle")
        on = base / "on"
        subprocess.run(
            [PYTHON, "-m", "mp_engine", "init", "--remote", url, str(on)], env=env, check=True, capture_output=True
        )
        off = init_workspace(base / "off", env)
        for name, ws in (("git on, default poll interval", on), ("git off", off)):
            cpu, wakes = _idle(ws, env, seconds, base / f"{ws.name}.log")
            row = Row(
                f"4. idle CPU, {name}, {seconds} s", Stat(cpu, cpu, 1), "-", None, "< 0.5 % of a core", cpu < 0.5, "%"
            )
            rows.append(row)
            rows.append(Row(f"4. idle wake-ups, {name}", Stat(wakes, wakes, 1), "-", None, "report", None, "/s"))
    return rows
