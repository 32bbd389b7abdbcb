"""20. The agent sandbox's cost (issue #33): what `[agent] sandbox = "os"` adds to one agent
call and to one check, through the engine's own process runner (`execute/process.run_process`,
own process group, scrubbed environment, output to files), over a worktree of a real git
workspace, as the engine runs them.

- A trivial call (`true`), without the sandbox (the baseline) and inside it without network.
- The same call with one allowed host, so the relay's two halves start and stop with it
  (its inside half is a Python process).
- A trivial check (`sh -e` of a one-line script), both ways.

Target: the issue's, at most 50 ms added per call (the median difference), with the ratio
beside it.
"""

from __future__ import annotations

import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench.common import Row, Stat
from mp_engine.execute.process import run_process, scrub_env
from mp_engine.execute.sandbox import Sandbox, confined, problem

LIMIT_MS = 50.0


def workspace(base: Path) -> tuple[Path, Path]:
    root = base / "ws"
    root.mkdir()
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "ws"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    work = root / "SYSTEM" / ".engine" / "work" / "run-1"
    subprocess.run(["git", "worktree", "add", "-q", "-b", "w", str(work)], cwd=root, check=True, capture_output=True)
    return root, work


def timed(box: Sandbox | None, argv: list[str], cwd: Path, out: Path) -> float:
    t0 = time.perf_counter()
    with confined(box, argv) as run_argv:
        res = run_process(run_argv, cwd=cwd, env=scrub_env(), timeout=60, stdout_path=out / "o", stderr_path=out / "e")
    ms = (time.perf_counter() - t0) * 1000
    assert res.ok, (out / "e").read_text()[-500:]
    return ms


def _added(figure: str, value: Stat, baseline: Stat) -> Row:
    added = value.median - baseline.median
    row = Row(figure, value, "the same, unsandboxed", baseline, f"<= +{LIMIT_MS:g} ms", added <= LIMIT_MS)
    row.note = f"+{added:.1f} ms median"
    return row


def run(reps: int) -> list[Row]:
    why = problem()
    if why is not None:
        return [
            Row(
                "20. sandbox: a trivial agent call",
                None,
                "-",
                None,
                f"<= +{LIMIT_MS:g} ms",
                None,
                "ms",
                f"not measured: {why}",
            )
        ]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="mpe-bench-sandbox-", dir="/var/tmp") as d:
        base = Path(d)
        root, work = workspace(base)
        out = base / "out"
        out.mkdir()
        script = base / "check.sh"
        script.write_text("test -d .\n")
        server = _listener()
        plain = Sandbox.of(work, engine_root=root, writable=[out])
        relayed = Sandbox.of(work, engine_root=root, writable=[out], allow_hosts=[f"127.0.0.1:{server}"])
        checks = Sandbox.of(work, engine_root=root, writable=[out], readable=[script])
        n = max(10, reps)
        for _ in range(3):  # warm: page cache, bwrap's first start
            timed(plain, ["true"], work, out)
        call = Stat.of([timed(None, ["true"], work, out) for _ in range(n)])
        boxed = Stat.of([timed(plain, ["true"], work, out) for _ in range(n)])
        relay = Stat.of([timed(relayed, ["true"], work, out) for _ in range(n)])
        check = Stat.of([timed(None, ["/bin/sh", "-e", str(script)], work, out) for _ in range(n)])
        boxed_check = Stat.of([timed(checks, ["/bin/sh", "-e", str(script)], work, out) for _ in range(n)])
        rows.append(_added("20. sandbox: a trivial agent call, no network", boxed, call))
        rows.append(_added("20. sandbox: a trivial agent call, one allowed host (relay)", relay, call))
        rows.append(_added("20. sandbox: a trivial check", boxed_check, check))
    return rows


def _listener() -> int:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    threading.Thread(target=lambda: [s.accept() for _ in iter(int, 1)], daemon=True).start()
    return s.getsockname()[1]
