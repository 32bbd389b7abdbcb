"""3. Remote poll cost and push -> RUNNING latency.

- Cost: wall and CPU time (the engine's own plus its git children) of one idle poll
  cycle, `GitChannel.poll()` with nothing new, against one `git ls-remote` of the branch.
- Latency: the real daemon with `[git] poll_interval = 1`; the orchestrator pushes an MP
  and we time until SESSION_STATE.json on disk says RUNNING. The bound is the poll
  interval plus one pull (fetch + merge, measured by hand in the same run).
"""

from __future__ import annotations

import resource
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import (
    PYTHON,
    Daemon,
    Row,
    Stat,
    StateWatcher,
    engine_env,
    git,
    git_env,
    info_row,
    mp_text,
    ratio_row,
)
from bench.gitcost import EngineSide, _orchestrator, _push_mp, seed_remote


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def cost(base: Path, reps: int) -> list[Row]:
    url = seed_remote(base, "poll")
    side = EngineSide(base, url, "poll-ws")
    sync = side.engine.sync
    assert sync is not None
    ws = side.root
    env = git_env()
    walls: dict[str, list[float]] = {"engine": [], "ls": []}
    cpus: dict[str, list[float]] = {"engine": [], "ls": []}
    for i in range(reps + 2):
        c, t = _cpu(), time.perf_counter()
        out = sync.poll()
        walls["engine"].append(time.perf_counter() - t)
        cpus["engine"].append(_cpu() - c)
        assert out.problem is None and not out.integrated
        c, t = _cpu(), time.perf_counter()
        subprocess.run(
            ["git", "ls-remote", "--heads", "origin", "refs/heads/main"],
            cwd=ws,
            env=env,
            check=True,
            capture_output=True,
        )
        walls["ls"].append(time.perf_counter() - t)
        cpus["ls"].append(_cpu() - c)
        if i < 2:
            for v in (*walls.values(), *cpus.values()):
                v.pop()
    ms = {k: Stat.of(v).scaled(1000) for k, v in walls.items()}
    cpu = {k: Stat.of(v).scaled(1000) for k, v in cpus.items()}
    return [
        ratio_row("3. idle poll cycle, wall", ms["engine"], "git ls-remote", ms["ls"], 1.5),
        ratio_row("3. idle poll cycle, CPU (self + children)", cpu["engine"], "git ls-remote", cpu["ls"], 1.5),
    ]


def latency(base: Path, reps: int) -> list[Row]:
    interval = 1.0
    url = seed_remote(base, "lat")
    env = engine_env(base, MP_ENGINE_GIT__POLL_INTERVAL=str(interval))
    ws = base / "lat-ws"
    subprocess.run(
        [PYTHON, "-m", "mp_engine", "init", "--remote", url, str(ws)],
        env=env,
        check=True,
        capture_output=True,
    )
    orch = _orchestrator(base, url, "lat-orch")
    hand = base / "lat-hand"
    git(base, "clone", "--quiet", url, str(hand))
    daemon = Daemon(ws, env, base / "lat-daemon.log")
    samples, pulls = [], []
    try:
        daemon.wait_online()
        watcher = StateWatcher(ws / "SESSION_STATE.json")
        try:
            for i in range(reps):
                mp_id = f"MP-{i + 1}.0"
                mark = watcher.mark()
                _push_mp(orch, mp_text(mp_id))
                t0 = time.perf_counter()
                t1 = watcher.wait(mark, lambda d, m=mp_id: d.get("status") == "RUNNING" and d.get("current") == m)
                samples.append(t1 - t0)
                watcher.wait(mark, lambda d, m=mp_id: d.get("last_completed") == m, timeout=60)
                deadline = time.monotonic() + 60  # an orchestrator sends the next MP after the result
                while not git(base / "lat.git", "log", "-1", "--format=%s", "main").strip().endswith("COMPLETED"):
                    if time.monotonic() > deadline:
                        raise TimeoutError("the result never reached the remote")
                    time.sleep(0.02)
                t = time.perf_counter()
                git(hand, "fetch", "--quiet", "origin", "main")
                git(hand, "merge", "--quiet", "--ff-only", "FETCH_HEAD")
                pulls.append(time.perf_counter() - t)
        finally:
            watcher.close()
    finally:
        daemon.stop()
    lat = Stat.of(samples).scaled(1000)
    pull = Stat.of(pulls).scaled(1000)
    bound = Stat(interval * 1000 + pull.median, interval * 1000 + pull.p95, pull.n)
    row = Row("3. push -> RUNNING, daemon, poll_interval 1 s", lat, "poll interval + one pull", bound, "<= 1x", None)
    row.met = lat.p95 <= bound.p95
    row.note = "p95 compared"
    return [row, info_row("3. one pull by hand (fetch + merge --ff-only)", pull)]


def run(reps: int) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="mpe-bench-poll-") as d:
        return cost(Path(d), reps) + latency(Path(d), max(5, reps // 3))
