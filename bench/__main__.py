"""`python -m bench` (or `make bench`): run the benchmark suite, print the table, and
write it into bench/RESULTS.md.

    python -m bench                 # everything (several minutes)
    python -m bench --quick         # fewer samples, a shorter idle window
    python -m bench detect startup  # only these measurements
    python -m bench --no-write      # print only
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.common import Row, table  # noqa: E402
from mp_engine.record import logs  # noqa: E402

# name -> ("module:function", full reps, quick reps); run in this order
BENCHES = {
    "detect": ("bench.detect:run", 40, 10),
    "git": ("bench.gitcost:run", 20, 6),
    "poll": ("bench.poll:run", 30, 8),
    "idle": ("bench.idle:run", 60, 15),  # seconds of idle per mode
    "memory": ("bench.memory:run", 1000, 150),  # MPs
    "bigrepo": ("bench.gitcost:run_big", 20, 4),  # 50,000-file MPs are slow and noisy: more samples
    "throughput": ("bench.memory:run_throughput", 1000, 150),  # reuses the memory run's MPs
    "startup": ("bench.startup:run", 20, 8),
    "agent": ("bench.agentloop:run", 30, 10),
    "network": ("bench.network:run", 20, 6),  # 50 ms round trips: a few seconds per MP pair
    "ledger": ("bench.ledger:run", 5000, 1000),  # steps of one long MP
    "output": ("bench.output:run", 200, 50),  # MB one step prints
    "parser": ("bench.parser:run", 7, 3),  # best of N parses per shape
    "prompts": ("bench.prompts:run", 1, 1),  # one MP: 3 micro-tasks x 3 iterations
    "clicost": ("bench.clicost:run", 5, 2),  # MPs per real CLI (from the conformance cache)
    "repomap": ("bench.repomap:run", 5, 2),  # cold/warm/changed builds of a 2,000-file map
    "parallel": ("bench.parallel:run", 2, 1),  # runs of 8 tasks of 2 s at max_parallel 1, 2, 4, 8
    "fleet": ("bench.fleet:run", 2, 1),  # runs of 12 tasks of 2 s on 1, 2, 3 workers through Temporal
    "dashboard": ("bench.dashboard:run", 40, 12),  # requests per figure; a fifth of them browser updates
    "sandbox": ("bench.sandbox:run", 60, 20),  # trivial calls and checks, each way
    "pullrequest": ("bench.pullrequest:run", 30, 8),  # pushes opened as pull requests; one CI wait
    "gates": ("bench.gates:run", 30, 8),  # protected-path looks and budget checks (issue #42)
    "eval": ("bench.evalrun:run", 2, 1),  # a 16-task eval with a 1 s agent, serially and 4 at once
    "evaldemo": ("bench.evalrun:run_demo", 1, 1),  # the demo set, init --agent claude, a scripted 1 s model
}

START, END = "<!-- bench:table:start -->", "<!-- bench:table:end -->"


def machine() -> str:
    git = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    return (
        f"{time.strftime('%Y-%m-%d')}, {platform.system()} {platform.release()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, {git}"
    )


def write_results(text: str) -> Path:
    path = HERE / "RESULTS.md"
    old = path.read_text() if path.exists() else f"# Benchmark results\n\n{START}\n{END}\n"
    if START not in old or END not in old:
        old = f"{old.rstrip()}\n\n{START}\n{END}\n"
    head, rest = old.split(START, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{START}\n{text}\n{END}{tail}")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument(
        "names", nargs="*", metavar="NAME", help=f"measurements to run (default: all): {', '.join(BENCHES)}"
    )
    ap.add_argument("--quick", action="store_true", help="fewer samples; numbers are noisier")
    ap.add_argument(
        "--no-write", action="store_true", help="print the table without updating RESULTS.md (default for a subset)"
    )
    args = ap.parse_args(argv)
    logs.configure("warning")  # the engine runs in-process for some figures: keep its log quiet
    names = args.names or list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        ap.error(f"unknown measurement {', '.join(unknown)}; choose from {', '.join(BENCHES)}")
    rows: list[Row] = []
    failed = []
    for name in names:
        target, full, quick = BENCHES[name]
        module, func = target.split(":")
        reps = quick if args.quick else full
        print(f"== {name} ({reps})", file=sys.stderr, flush=True)
        started = time.monotonic()
        try:
            rows.extend(getattr(importlib.import_module(module), func)(reps))
        except Exception:
            traceback.print_exc()
            failed.append(name)
        print(f"   {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    text = f"Measured {machine()}{' (--quick)' if args.quick else ''}; medians and p95.\n\n{table(rows)}"
    if failed:
        text += f"\n\nNot measured (the benchmark itself failed): {', '.join(failed)}."
    print(text)
    # RESULTS.md holds one complete run: a subset would replace the table with a part of it.
    if not args.no_write and set(names) == set(BENCHES):
        print(f"\nwritten to {write_results(text)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
