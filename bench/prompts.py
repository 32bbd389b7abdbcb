"""14. Prompts built for caching: how much of each prompt a provider's prefix cache can
reuse, and how the prompt grows.

A realistic agent MP (a goal of a few paragraphs, three micro-tasks, a check per task that
prints a pytest-like failure report) runs through `Engine.tick()` in a git workspace that
holds a small Python project (60 modules: the repository map fills the token budget as it
does in a real repository), with an agent (a bash script) that claims each micro-task
twice before it does the work, so each micro-task takes three iterations with failures,
learnings and a shrinking budget. For every prompt after the first, in the order the run
sent them (the next iteration of a task, and the first iteration of the next task): the
share that is byte-identical to the previous prompt from the start (the part a prefix
cache can serve). Target: at least 80 % each (issues #16, #34); sizes are reported.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench.common import Row, Stat, agent_workspace, engine_env, engine_in_process, executable, info_row

TARGET = 0.80
TRIES = 3  # iterations per micro-task: two false claims, then the work

AGENT = r"""#!/bin/bash
# Claims each micro-task at once; does the work only from its third iteration on.
prompt=$1
while IFS= read -r line; do
  case $line in "NONCE: "*) nonce=${line#NONCE: }; break;; esac
done < "$prompt"
if [ "${MP_ITERATION:-1}" -ge 3 ]; then
  file=$(sed -n 's/^[0-9]*\. Write "done" to `\(.*\)`\.$/\1/p' "$prompt" | head -1)
  mkdir -p "$(dirname "$file")" && echo done > "$file"
fi
printf '<mt_complete nonce="%s">the check passes</mt_complete>\n' "$nonce"
printf -- '---LOOPR_STATUS---\nNONCE: %s\nSTATUS: COMPLETE\nEXIT_SIGNAL: true\nWORK_TYPE: code\n' "$nonce"
printf 'FILES_MODIFIED: 1\nERRORS: 0\nSUMMARY: wrote the file\n---END_LOOPR_STATUS---\n'
"""

GOAL = (
    "The reporting service writes one summary file per region. Each summary is produced by a "
    "separate job; the jobs share a configuration module and a small library of formatters. "
    "Keep the public interfaces as they are: other teams import them. "
) * 6


# What each micro-task's check prints when it fails: a pytest-like report of 30 lines (about
# the 2,000-byte tail the next prompt shows), 5 lines, nothing.
NOISE = (30, 5, 0)


def mp_text(tasks: int) -> str:
    items = "\n".join(f'{i}. Write "done" to `out/part{i}.txt`.' for i in range(1, tasks + 1))
    checks = "\n".join(
        f"```bash\n# MT-{i:03d}\n"
        f"grep -qx done out/part{i}.txt || {{ for n in $(seq 1 {NOISE[(i - 1) % len(NOISE)]}); do "
        f'echo "FAILED tests/test_part{i}.py::test_case_$n - AssertionError: out/part{i}.txt is missing"; '
        "done; exit 1; }\n```\n"
        for i in range(1, tasks + 1)
    )
    return f"# MP-14.1 Region summaries\nExecutor: agent\n\n{GOAL}\n\n{items}\n\n## Validate\n\n{checks}"


def common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def project(root: Path, modules: int = 60) -> None:
    """A small Python project: `modules` modules of a few functions and a class each."""
    for i in range(modules):
        pkg = root / "src" / "reports" / f"part{i // 10}"
        pkg.mkdir(parents=True, exist_ok=True)
        funcs = "".join(
            f"def summarise_{i}_{k}(rows: list[dict], region: str, *, limit: int = 10) -> dict:\n"
            f'    """Summary {k} of module {i}."""\n    return {{"region": region, "n": len(rows[:limit])}}\n\n\n'
            for k in range(4)
        )
        (pkg / f"job{i}.py").write_text(
            f"{funcs}class Job{i}:\n    def run(self, config: dict) -> None:\n        pass\n\n"
            "    def describe(self) -> str:\n        return self.__class__.__name__\n"
        )


def measure_once(tasks: int = 3) -> tuple[list[float], list[int], list[str]]:
    """Shares (every prompt after the first, in sending order), sizes and a line per micro-task."""
    with tempfile.TemporaryDirectory(prefix="mpe-bench-prompts-") as tmp:
        base = Path(tmp)
        env = engine_env(base, MP_ENGINE_ENGINE__SETTLE_SECONDS="0")
        agent = executable(base / "agent.sh", AGENT)
        ws = agent_workspace(
            base / "ws",
            env,
            f"[agent]\nmax_iterations = {tasks * TRIES + 2}\nfail_threshold = 10\nmax_no_progress = 10\n"
            f'max_test_only = 10\n\n[[agent.levels]]\nname = "claimer"\nargv = ["{agent}", "{{prompt_file}}"]\n',
            populate=project,
        )
        with engine_in_process(ws, env) as engine:
            (ws / "Claude_Inbox" / "incoming_microproject.txt").write_text(mp_text(tasks))
            result = engine.tick()
        if result.action != "completed":
            raise RuntimeError(f"bench MP ended {result.action}: {result.detail}")
        shares, sizes, lines = [], [], []
        previous = None
        for mt in sorted(ws.glob("SYSTEM/runs/*/agent/MT-*")):  # tasks run one after another
            prompts = [p.read_text() for p in sorted(mt.glob("iter-*/prompt.md"))]
            sizes += [len(p.encode()) for p in prompts]
            mine = [common_prefix(a, b) / len(b) for a, b in zip([previous, *prompts], prompts, strict=False) if a]
            shares += mine
            lines.append(
                f"{mt.name}: {', '.join(f'{len(p.encode()) / 1024:.1f}' for p in prompts)} KiB, "
                f"cached {', '.join(f'{s:.0%}' for s in mine)}"
            )
            previous = prompts[-1]
        return shares, sizes, lines


def run(reps: int) -> list[Row]:
    shares, sizes, lines = measure_once()
    worst = min(shares)
    share = Stat.of([s * 100 for s in shares])
    row = Row(
        "14. prompt share a prefix cache reuses (every prompt after the first: iterations and tasks)",
        share,
        "-",
        None,
        f">= {TARGET:.0%} each",
        worst >= TARGET,
        unit="%",
        note=f"lowest {worst:.1%}; per micro-task: " + "; ".join(lines),
    )
    return [row, info_row("14. prompt size per iteration", Stat.of([s / 1024 for s in sizes]), unit="KiB")]
