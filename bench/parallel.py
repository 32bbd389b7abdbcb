"""17. Parallel tasks (issue #29): eight independent micro-tasks whose agent takes 2 s per
call, at `max_parallel` 1, 2, 4 and 8, through `Engine.tick()` in this process, in a git
workspace.

Each task's agent (a bash script) reads its prompt, sleeps 2 s (the model's time), writes
`out/<MT-id>.txt` and claims completion; its check asks for that file. The MP says
`Max-Parallel: N`; the configuration allows 8.

Baseline, in the same run: the ideal wall time of each run, the critical path plus the
integrations (which are one at a time): ceil(8 / N) x 2 s plus the sum of the run's
integration times, read from its ledger (`INT-<n>` steps). `max_parallel = 1` is the
one-at-a-time loop, which has no integration: its ideal is 8 x 2 s. Target: at most 1.15x
at 4 and 8. Reported beside: the integration cost per task, and the engine's own CPU
(this process, its threads included; the agents, checks and git are children) per task
and per running task.
"""

from __future__ import annotations

import json
import math
import resource
import tempfile
import time
from pathlib import Path

from bench.common import Row, Stat, agent_workspace, engine_env, engine_in_process, executable, info_row

TASKS = 8
SLEEP = 2.0
LEVELS = (1, 2, 4, 8)
TARGET = 1.15

AGENT = r"""#!/bin/bash
# An honest agent that takes the model's time: find the nonce, sleep, write, claim.
while IFS= read -r line; do
  case $line in "NONCE: "*) nonce=${line#NONCE: }; break;; esac
done < "$1"
sleep SLEEP
mkdir -p out && echo "$MP_MT" > "out/$MP_MT.txt"
printf '<mt_complete nonce="%s">its file is written</mt_complete>\n' "$nonce"
printf -- '---LOOPR_STATUS---\nNONCE: %s\nSTATUS: COMPLETE\nEXIT_SIGNAL: true\nWORK_TYPE: code\n' "$nonce"
printf 'FILES_MODIFIED: 1\nERRORS: 0\nSUMMARY: wrote its file\n---END_LOOPR_STATUS---\n'
""".replace("SLEEP", str(SLEEP))


def mp(mp_id: str, parallel: int) -> str:
    items = "\n".join(f"{i}. Write the file of MT-{i:03d}. (after none)" for i in range(1, TASKS + 1))
    checks = "\n\n".join(f"```bash\n# MT-{i:03d}\ntest -s out/MT-{i:03d}.txt\n```" for i in range(1, TASKS + 1))
    return f"# {mp_id} bench\nExecutor: agent\nMax-Parallel: {parallel}\n\nEight files.\n\n{items}\n\n## Validate\n\n{checks}\n"


def agent_toml(agent: Path) -> str:
    return (
        '[agent]\nmax_iterations = 1000\ncalls_per_hour = 100000\nmax_parallel = 8\nland = "branch"\n\n'
        + f'[[agent.levels]]\nname = "sleepy"\nargv = ["{agent}", "{{prompt_file}}"]\n'
    )


def integrations(run_dir: Path) -> list[float]:
    """The seconds each integration of the run took, from its ledger."""
    from mp_engine.core.clock import parse_iso

    ledger = json.loads((run_dir / "ledger.json").read_text())
    return [
        (parse_iso(s["completed_at"]) - parse_iso(s["started_at"])).total_seconds()
        for s in ledger["steps"]
        if s["kind"] == "integrate" and s.get("completed_at")
    ]


def one(engine, ws: Path, mp_id: str, parallel: int) -> tuple[float, list[float], float]:
    """(wall seconds, integration seconds, engine CPU seconds) of one MP."""
    (ws / "Claude_Inbox" / "incoming_microproject.txt").write_text(mp(mp_id, parallel))
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    result = engine.tick()
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    if result.action != "completed":
        raise RuntimeError(f"bench MP ended {result.action}: {result.detail}; see {ws / 'SYSTEM/RESULT_last.md'}")
    run_dir = next(p for p in (ws / "SYSTEM" / "runs").iterdir() if p.name.endswith(mp_id))
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return wall, integrations(run_dir), cpu


def measure(reps: int) -> list[Row]:
    walls: dict[int, list[float]] = {n: [] for n in LEVELS}
    ideals: dict[int, list[float]] = {n: [] for n in LEVELS}
    cost: list[float] = []
    cpu_task: dict[int, list[float]] = {n: [] for n in LEVELS}
    with tempfile.TemporaryDirectory(prefix="mpe-bench-parallel-") as tmp:
        base = Path(tmp)
        env = engine_env(base, MP_ENGINE_ENGINE__SETTLE_SECONDS="0")
        agent = executable(base / "agent.sh", AGENT)
        ws = agent_workspace(base / "ws", env, agent_toml(agent))
        with engine_in_process(ws, env) as engine:
            for rep in range(reps):
                for n in LEVELS:
                    wall, ints, cpu = one(engine, ws, f"MP-17.{rep}{n}", n)
                    walls[n].append(wall)
                    ideals[n].append(math.ceil(TASKS / n) * SLEEP + sum(ints))
                    cost += [i * 1000 for i in ints]
                    cpu_task[n].append(cpu / TASKS * 1000)
    rows = []
    for n in LEVELS:
        ratio = Stat.of([w / i for w, i in zip(walls[n], ideals[n], strict=True)])
        rows.append(
            Row(
                f"17. {TASKS} tasks of {SLEEP:g} s, max_parallel {n}",
                Stat.of(walls[n]),
                "ideal: critical path + integrations",
                Stat.of(ideals[n]),
                f"<= {TARGET}x" if n >= 4 else "report",
                ratio.median <= TARGET if n >= 4 else None,
                unit="s",
                note=f"{ratio.median:.2f}x the ideal; engine CPU {Stat.of(cpu_task[n]).median:.0f} ms per task",
            )
        )
    rows.append(info_row("17. integration cost per task", Stat.of(cost)))
    busy = Stat.of(
        [c / 1000 * TASKS / w / n * 100 for n in LEVELS[1:] for c, w in zip(cpu_task[n], walls[n], strict=True)]
    )
    rows.append(info_row("17. engine CPU per running task (% of a core)", busy, unit="%"))
    return rows


def run(reps: int) -> list[Row]:
    return measure(reps)
