"""`python -m bench.soak` (or `make soak`): run the soak, print its verdict and figures, and
write them to bench/SOAK.md. Exit 1 when an invariant failed.

    python -m bench.soak                          # SOAK_MPS (1500), SOAK_SEED (45), SOAK_FAULTS (MPs / 10)
    python -m bench.soak --mps 60 --faults 12 --no-write
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from bench.soak import report  # noqa: E402
from bench.soak.run import Settings, soak  # noqa: E402
from mp_engine.record import logs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.splitlines()[0])
    ap.add_argument("--mps", type=int, default=int(os.environ.get("SOAK_MPS") or "1500"), help="MPs to send")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED") or "45"), help="the schedule's seed")
    faults = os.environ.get("SOAK_FAULTS")
    ap.add_argument("--faults", type=int, default=int(faults) if faults else None, help="faults (default MPs / 10)")
    ap.add_argument("--kinds", help="only these faults, comma-separated (default: every kind)")
    ap.add_argument("--burst", type=int, default=250, help="MPs between idle checkpoints")
    ap.add_argument("--disk-mb", type=int, default=2048, help="the engine's file system (a tmpfs), MiB")
    ap.add_argument("--workdir", type=Path, help="where the soak's temporary directory goes")
    ap.add_argument("--keep", action="store_true", help="keep the soak's directory (always kept on a failure)")
    ap.add_argument("--no-write", action="store_true", help="print only; bench/SOAK.md untouched")
    args = ap.parse_args(argv)
    settings = Settings(
        mps=args.mps,
        seed=args.seed,
        faults=args.faults,
        burst=args.burst,
        disk_mb=args.disk_mb,
        workdir=args.workdir,
        keep=args.keep,
        fault_kinds=frozenset(args.kinds.split(",")) if args.kinds else None,
    )
    logs.configure("warning")  # the client and the set-up run in this process: keep their log quiet
    outcome = soak(settings)
    text = report.markdown(outcome)
    print(text)
    if not args.no_write:
        print(f"\nwritten to {report.write(text)}", file=sys.stderr)
    if outcome.workdir is not None:
        print(f"the soak's directory is kept: {outcome.workdir}", file=sys.stderr)
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
