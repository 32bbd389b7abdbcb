"""9. Agent-loop overhead: the engine's own time per iteration of the agent executor.

An agent that answers at once (a bash script that reads the prompt file, finds the nonce
and claims completion) drives MPs through `Engine.tick()` in this process, in a git
workspace, as the daemon would. Two MPs per repetition: one with 1 micro-task and one with
1 + EXTRA micro-tasks, every micro-task passing its one check at the first iteration. The
difference divided by EXTRA is the time of one iteration, without the per-MP work (claim,
archive, result, state).

Baseline, in the same run: the processes one iteration must start by hand (the agent
script on a prompt file, and `bash` running the check), one after the other. The engine's
own time per iteration (prompt build, checks dispatch, evidence hashing, workspace
fingerprint, ledger and progress writes) is the difference; the target is <= 20 ms.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import Row, Stat, agent_workspace, engine_env, engine_in_process, executable, info_row

EXTRA = 10
LIMIT_MS = 20.0

AGENT = r"""#!/bin/bash
# The fastest honest agent: read the prompt, find this run's nonce, claim completion.
while IFS= read -r line; do
  case $line in "NONCE: "*) nonce=${line#NONCE: }; break;; esac
done < "$1"
printf '<mt_complete nonce="%s">check-1 passes</mt_complete>\n' "$nonce"
printf -- '---LOOPR_STATUS---\nNONCE: %s\nSTATUS: COMPLETE\nEXIT_SIGNAL: true\nWORK_TYPE: code\n' "$nonce"
printf 'FILES_MODIFIED: 0\nERRORS: 0\nSUMMARY: nothing to do\n---END_LOOPR_STATUS---\n'
"""


def mp(mp_id: str, tasks: int) -> str:
    items = "\n".join(f"{i}. Step {i}: leave the tree as it is." for i in range(1, tasks + 1))
    return f"# {mp_id} bench\nExecutor: agent\n\nNothing to change.\n\n{items}\n\n## Validate\n```bash\ntrue\n```\n"


def agent_toml(agent: Path) -> str:
    return (
        "[agent]\nmax_iterations = 1000\ncalls_per_hour = 100000\n\n"
        + f'[[agent.levels]]\nname = "instant"\nargv = ["{agent}", "{{prompt_file}}"]\n'
    )


def run_mp(engine, ws: Path, text: str) -> float:
    inbox = ws / "Claude_Inbox" / "incoming_microproject.txt"
    inbox.write_text(text)
    t0 = time.perf_counter()
    result = engine.tick()
    elapsed = time.perf_counter() - t0
    if result.action != "completed":
        raise RuntimeError(f"bench MP ended {result.action}: {result.detail}; see {ws / 'SYSTEM/RESULT_last.md'}")
    return elapsed


def by_hand(agent: Path, prompt: Path, env: dict[str, str]) -> float:
    """One iteration's processes, started directly: the physical floor."""
    t0 = time.perf_counter()
    subprocess.run([str(agent), str(prompt)], stdout=subprocess.DEVNULL, env=env, check=True)
    subprocess.run(["bash", "-c", "true"], stdout=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - t0


def measure(reps: int) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="mpe-bench-agent-") as tmp:
        base = Path(tmp)
        env = engine_env(base, MP_ENGINE_ENGINE__SETTLE_SECONDS="0")
        agent = executable(base / "agent.sh", AGENT)
        ws = agent_workspace(base / "ws", env, agent_toml(agent))
        with engine_in_process(ws, env) as engine:
            run_mp(engine, ws, mp("MP-0.1", 1))  # warm-up: imports, first files
            per_iter, floor = [], []
            prompt = next(ws.glob("SYSTEM/runs/*/agent/MT-001/iter-001/prompt.md"))
            for i in range(reps):
                one = run_mp(engine, ws, mp(f"MP-1.{i}", 1))
                many = run_mp(engine, ws, mp(f"MP-2.{i}", 1 + EXTRA))
                per_iter.append((many - one) / EXTRA * 1000)
                floor.append(by_hand(agent, prompt, env) * 1000)

    value, baseline = Stat.of(per_iter), Stat.of(floor)
    overhead = Stat.of([v - b for v, b in zip(per_iter, floor, strict=True)])
    row = Row(
        "9. agent-loop iteration (engine time = value - baseline)",
        value,
        "agent + check processes by hand",
        baseline,
        f"<= +{LIMIT_MS:g} ms",
        overhead.median <= LIMIT_MS,
        note=f"engine's own time {overhead.median:.1f} ms median, {overhead.p95:.1f} ms p95",
    )
    return [row, info_row("9. engine's own time per iteration", overhead)]
