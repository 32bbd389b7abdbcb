"""mp-engine benchmarks: each target measured against a baseline in the same run.

Machines are noisy, so every row is a ratio to a baseline measured right next to it, and
the numbers are medians of several repetitions. Prints a Markdown table; paste it into
bench/RESULTS.md with the date and machine.

    make bench            # or: .venv/bin/python bench/run.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mp_engine import logs  # noqa: E402
from mp_engine.atomic import atomic_write  # noqa: E402
from mp_engine.config import load_config  # noqa: E402
from mp_engine.engine import Engine  # noqa: E402
from mp_engine.watchers import NativeWatcher, PollingWatcher  # noqa: E402
from mp_engine.workspace import init_workspace  # noqa: E402

MP = "# MP-{n}.0 bench\n\n```bash\ntrue\n```\n"


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def bench_writes(rounds: int) -> tuple[float, float]:
    """atomic_write (temp + fsync + rename + dir fsync) vs a plain write + fsync."""
    with tempfile.TemporaryDirectory() as d:
        target = Path(d) / "state.json"
        payload = b"{" + b'"k": "v", ' * 40 + b'"end": 1}\n'
        plain, atomic = [], []
        for _ in range(rounds):
            t = time.perf_counter()
            with open(target, "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            plain.append(time.perf_counter() - t)
            t = time.perf_counter()
            atomic_write(target, payload)
            atomic.append(time.perf_counter() - t)
    return median_ms(plain), median_ms(atomic)


def _detect_latency(watcher_cls, rounds: int) -> float:
    """Seconds from an MP renamed into the inbox to its claim, with the rescan timer off."""
    os.environ["MP_ENGINE_ENGINE__POLL_INTERVAL"] = "60"
    os.environ["MP_ENGINE_ENGINE__SETTLE_SECONDS"] = "0.2"
    os.environ["MP_ENGINE_WATCH__POLLING_INTERVAL"] = "0.1"
    samples = []
    with tempfile.TemporaryDirectory() as d:
        ws, _ = init_workspace(Path(d) / "ws")
        engine = Engine(ws, load_config(ws.root))
        claimed = threading.Event()
        original = engine._start_run

        def start_run(*a, **k):
            claimed.set()
            return original(*a, **k)

        engine._start_run = start_run  # type: ignore[method-assign]
        thread = threading.Thread(target=engine.run, kwargs={"watcher_factory": watcher_cls}, daemon=True)
        thread.start()
        time.sleep(0.5)  # let the observer start
        for n in range(rounds):
            claimed.clear()
            tmp = ws.inbox_dir / ".partial"
            tmp.write_text(MP.format(n=n))
            t = time.perf_counter()
            os.replace(tmp, ws.inbox_file)
            if not claimed.wait(30):
                raise RuntimeError("MP not claimed within 30 s")
            samples.append(time.perf_counter() - t)
            deadline = time.monotonic() + 30
            while ws.inbox_file.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        engine.stop.set()
        engine.wake.set()
        thread.join(30)
    return median_ms(samples)


def bench_once(rounds: int) -> tuple[float, float]:
    """A whole `mp-engine once` (interpreter start, parse, archive, run, result, state)
    vs the bare `bash -c true` it runs."""
    env = {**os.environ, "MP_ENGINE_ENGINE__SETTLE_SECONDS": "0"}
    bare, once = [], []
    with tempfile.TemporaryDirectory() as d:
        ws, _ = init_workspace(Path(d) / "ws")
        for n in range(rounds):
            t = time.perf_counter()
            subprocess.run(["bash", "-c", "true"], check=True)
            bare.append(time.perf_counter() - t)
            ws.inbox_file.write_text(MP.format(n=n))
            t = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "mp_engine", "once", "--root", str(ws.root)],
                check=True,
                env=env,
                capture_output=True,
            )
            once.append(time.perf_counter() - t)
    return median_ms(bare), median_ms(once)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args()
    logs.configure("warning")
    n = 5 if args.quick else 15
    rows = []
    plain, atomic = bench_writes(n * 20)
    rows.append(("state write: atomic_write vs write+fsync", "plain write+fsync", plain, atomic))
    native = _detect_latency(NativeWatcher, n)
    polling = _detect_latency(PollingWatcher, n)
    rows.append(("MP detection: polling vs native watcher", "native (inotify)", native, polling))
    bare, once = bench_once(max(3, n // 3))
    rows.append(("one MP via `mp-engine once` vs bare bash", "bash -c true", bare, once))
    print(
        f"mp-engine bench, {time.strftime('%Y-%m-%d')}, {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs"
    )
    print()
    print("| target | baseline | baseline ms | target ms | ratio |")
    print("|---|---|---:|---:|---:|")
    for name, base_name, base, target in rows:
        print(f"| {name} | {base_name} | {base:.2f} | {target:.2f} | {target / base:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
