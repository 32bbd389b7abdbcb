"""18. The fleet (issue #30): twelve independent micro-tasks whose agent takes 2 s per call,
on 1, 2 and 3 `mp-engine worker` processes with `--max-parallel 2` each, through a real
Temporal dev server (`temporal server start-dev`, SQLite) on loopback, the engine in this
process (`Engine.tick()`), a bare git repository as the work remote.

Workers are long-lived: each configuration runs one MP unmeasured first (a new worker's
first fetch and imports). Baseline, in the same run: the ideal wall time of each run, ceil(12 / (2 x workers)) x 2 s
plus the run's integration times (one at a time, read from its ledger). Target: at most
1.2x. Reported beside:

- Temporal's schedule-to-start latency of the attempts that found a free worker slot
  (the first 2 x workers of each run; the others wait for a slot by design), from each
  workflow's history (ActivityTaskScheduled -> ActivityTaskStarted);
- the fleet's overhead per task against local parallel tasks: the same MP with
  `max_parallel` 6 in the engine's own threads, against 3 workers x 2, (fleet wall - local
  wall) / 12.
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
import time
from pathlib import Path

from bench.common import Row, Stat, agent_workspace, engine_env, engine_in_process, executable, info_row, make_remote
from bench.parallel import AGENT, integrations

TASKS = 12
SLEEP = 2.0
WORKERS = (1, 2, 3)
PER_WORKER = 2
TARGET = 1.2


def mp(mp_id: str) -> str:
    items = "\n".join(f"{i}. Write the file of MT-{i:03d}. (after none)" for i in range(1, TASKS + 1))
    checks = "\n\n".join(f"```bash\n# MT-{i:03d}\ntest -s out/MT-{i:03d}.txt\n```" for i in range(1, TASKS + 1))
    return f"# {mp_id} bench\nExecutor: agent\n\nTwelve files.\n\n{items}\n\n## Validate\n\n{checks}\n"


def agent_toml(agent: Path, parallel: int) -> str:
    return (
        f'[agent]\nmax_iterations = 1000\ncalls_per_hour = 100000\nmax_parallel = {parallel}\nland = "branch"\n\n'
        + f'[[agent.levels]]\nname = "sleepy"\nargv = ["{agent}", "{{prompt_file}}"]\n'
    )


def one(engine, ws: Path, mp_id: str) -> tuple[float, Path]:
    (ws / "Claude_Inbox" / "incoming_microproject.txt").write_text(mp(mp_id))
    t0 = time.perf_counter()
    result = engine.tick()
    wall = time.perf_counter() - t0
    if result.action != "completed":
        raise RuntimeError(f"bench MP ended {result.action}: {result.detail}; see {ws / 'SYSTEM/RESULT_last.md'}")
    return wall, next(p for p in (ws / "SYSTEM" / "runs").iterdir() if p.name.endswith(mp_id))


async def schedule_to_start(address: str, run_dir: Path, first: int) -> list[float]:
    """Seconds from scheduled to started of the run's first `first` attempts (by start)."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client

    client = await Client.connect(address)
    ids = [
        json.loads(line)["attempt"]
        for line in (run_dir.parent.parent / ".engine" / "events.jsonl").open()
        if '"fleet_started"' in line and run_dir.name in line
    ]
    spans = []
    for wid in ids:
        history = await client.get_workflow_handle(wid).fetch_history()
        at = {e.event_type: e.event_time.ToMilliseconds() / 1000 for e in history.events}
        spans.append((at[EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED], at[EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]))
    spans.sort(key=lambda s: s[1])
    return [started - scheduled for scheduled, started in spans[:first]]


def measure(reps: int) -> list[Row]:
    from tests.fleetutil import FleetWorker, TemporalServer

    walls: dict[int, list[float]] = {n: [] for n in WORKERS}
    ideals: dict[int, list[float]] = {n: [] for n in WORKERS}
    latency: list[float] = []
    local: list[float] = []
    with tempfile.TemporaryDirectory(prefix="mpe-bench-fleet-") as tmp:
        base = Path(tmp)
        server = TemporalServer(base).start()
        env = engine_env(base, MP_ENGINE_ENGINE__SETTLE_SECONDS="0")
        agent = executable(base / "agent.sh", AGENT)
        url = f"file://{make_remote(base)}"
        level = {"name": "sleepy", "argv": [str(agent), "{prompt_file}"]}
        try:
            # Local parallel tasks: the baseline of the fleet's overhead (6 at once, as 3 x 2).
            ws_local = agent_workspace(base / "local", env, agent_toml(agent, PER_WORKER * max(WORKERS)))
            with engine_in_process(ws_local, env) as engine:
                one(engine, ws_local, "MP-18.99")  # warm, as the fleet's runs are
                for rep in range(reps):
                    local.append(one(engine, ws_local, f"MP-18.9{rep}")[0])
            fleet = f'\n[fleet]\ntemporal = "{server.address}"\ntask_queue = "bench"\nwork_remote = "{url}"\n'
            ws = agent_workspace(base / "ws", env, agent_toml(agent, TASKS) + fleet)
            workers: list[FleetWorker] = []
            with engine_in_process(ws, env) as engine:
                for n in WORKERS:
                    while len(workers) < n:
                        w = FleetWorker(
                            base, f"w{len(workers) + 1}", server.address, "bench", url, [level], max_parallel=PER_WORKER
                        )
                        workers.append(w.start())
                    one(engine, ws, f"MP-18.{n}9")  # warm: a new worker's clone and first imports
                    for rep in range(reps):
                        wall, run_dir = one(engine, ws, f"MP-18.{n}{rep}")
                        walls[n].append(wall)
                        ideals[n].append(math.ceil(TASKS / (PER_WORKER * n)) * SLEEP + sum(integrations(run_dir)))
                        latency += asyncio.run(schedule_to_start(server.address, run_dir, PER_WORKER * n))
            for w in workers:
                w.close()
        finally:
            server.close()
    rows = []
    for n in WORKERS:
        ratio = Stat.of([w / i for w, i in zip(walls[n], ideals[n], strict=True)])
        rows.append(
            Row(
                f"18. {TASKS} tasks of {SLEEP:g} s on {n} worker(s) x {PER_WORKER}",
                Stat.of(walls[n]),
                "ideal: waves of 2 s + integrations",
                Stat.of(ideals[n]),
                f"<= {TARGET}x",
                ratio.median <= TARGET,
                unit="s",
                note=f"{ratio.median:.2f}x the ideal",
            )
        )
    rows.append(
        info_row("18. Temporal schedule-to-start per attempt (a free slot)", Stat.of([x * 1000 for x in latency]))
    )
    over = Stat.of([(f - loc) / TASKS * 1000 for f, loc in zip(walls[max(WORKERS)], local, strict=True)])
    note = f"3 workers x 2 against max_parallel 6 here, whose run took {Stat.of(local).median:.1f} s"
    rows.append(Row("18. fleet overhead per task", over, "-", None, "report", None, "ms", note))
    return rows


def run(reps: int) -> list[Row]:
    return measure(reps)
