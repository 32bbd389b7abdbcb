"""8. Start-up: wall time of `mp-engine status` and `mp-engine --help`.

Baselines in the same run: `python -c pass` (the interpreter) and a script importing
the design card's packages (watchdog's observer, GitPython, pydantic, structlog,
filelock): the "import floor". Targets: `status`, which scripts poll, at most 3x
`python -c pass` (issue #15: it runs without click, structlog, pydantic or filelock, and
reads the validated configuration from its cache); `--help` at most 1.5x the import
floor, which holds only if commands import git and watchdog lazily.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import PYTHON, Row, Stat, engine_env, info_row, init_workspace, ratio_row

FLOOR = "import watchdog.observers, git, pydantic, structlog, filelock"


def _time(argv: list[str], env: dict[str, str], reps: int) -> Stat:
    samples = []
    for _ in range(reps + 2):
        t = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        samples.append(time.perf_counter() - t)
    return Stat.of(samples[2:]).scaled(1000)


def run(reps: int) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="mpe-bench-start-") as d:
        env = engine_env(Path(d))
        ws = init_workspace(Path(d) / "ws", env)
        mpe = [PYTHON, "-m", "mp_engine"]
        bare = _time([PYTHON, "-c", "pass"], env, reps)
        floor = _time([PYTHON, "-c", FLOOR], env, reps)
        status = _time([*mpe, "status", "--root", str(ws)], env, reps)
        helptext = _time([*mpe, "--help"], env, reps)
    return [
        info_row("8. python -c pass", bare),
        ratio_row("8. mp-engine status", status, "python -c pass", bare, 3.0),
        ratio_row("8. mp-engine --help", helptext, "import floor", floor, 1.5),
    ]
