"""11. A long MP: the time per step of the last 500 of N steps against the first 500.

One `mp-engine once` runs an MP of N trivial bash steps (`true`); the intervals between
its `step_finished` events are the engine's time per step plus one bash. The first 500
are the baseline measured in the same run. Target: at most 1.25x, a flat rate (issue
#20: with the ledger rewritten whole at every transition, 5,000 steps went from 84 to
15.6 steps/s; each transition now appends one journal line).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from datetime import datetime
from pathlib import Path

from bench.common import PYTHON, Row, Stat, engine_env, init_workspace, ratio_row

WINDOW = 500


def run(steps: int) -> list[Row]:
    steps = max(steps, 2 * WINDOW)
    with tempfile.TemporaryDirectory(prefix="mpe-bench-ledger-") as d:
        env = engine_env(Path(d), MP_ENGINE_ENGINE__SETTLE_SECONDS="0")
        ws = init_workspace(Path(d) / "ws", env)
        body = "".join("```bash\ntrue\n```\n\n" for _ in range(steps))
        (ws / "Claude_Inbox" / "incoming_microproject.txt").write_text(f"# MP-11.1 Long\nTimeout: 36000\n\n{body}")
        subprocess.run([PYTHON, "-m", "mp_engine", "once", "--root", str(ws)], env=env, check=True, capture_output=True)
        (events,) = (ws / "SYSTEM" / "runs").glob("*/events.jsonl")
        stamps = []
        for line in events.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("event") == "step_finished":
                stamps.append(datetime.fromisoformat(rec["ts"].replace("Z", "+00:00")).timestamp())

    # Milliseconds per step, averaged over runs of 50 steps (the events' stamps are in ms).
    def per_step(window: list[float]) -> Stat:
        return Stat.of([(window[i + 50] - window[i]) * 1000 / 50 for i in range(0, len(window) - 50, 50)])

    first, last = per_step(stamps[:WINDOW]), per_step(stamps[-WINDOW:])
    return [ratio_row(f"11. time per step, last {WINDOW} of {steps} steps", last, f"first {WINDOW}", first, 1.25)]


if __name__ == "__main__":  # pragma: no cover
    print(run(int(os.environ.get("STEPS", "5000"))))
