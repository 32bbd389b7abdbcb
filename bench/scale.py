"""25. Scale (issue #45): what a person reads of a workspace that has run for months, a
workspace with 10,000 archived runs (`[archive] keep_runs = 0`) and a 50 MiB event history
(events.jsonl and its rotated files), against the same workspace at 100 runs and the event
history those made, in one run, sampled round-robin:

- `mp-engine status`, `mp-engine history` (its default 20), `mp-engine logs -n 50`: fresh
  interpreters, as a person or a script runs them;
- the dashboard's state (`/api/v1/state`) and history (`/history`, its default) pages,
  served by `mp-engine dashboard`, warm, over HTTP on loopback.

The runs are copies of two real runs (a shell MP that completed, one that failed), which
differ only in name (hard links); results.jsonl holds their lines as the engine rotates it. Target: each
within 1.2x of its cost at 100 runs.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import PYTHON, Row, Stat, engine_env, init_workspace, mp_text, ratio_row

SMALL, BIG = 100, 10_000
EVENTS_BIG = 50 * 2**20
EVENTS_FILE_MAX = 10 * 2**20  # [engine] events_max_bytes, the default


def real_runs(ws: Path, env: dict[str, str]) -> list[Path]:
    """Two runs made by the engine itself (`once`): one completed, one failed and approved."""
    inbox = ws / "Claude_Inbox" / "incoming_microproject.txt"
    for text in (mp_text("MP-22.1", "echo one; echo two"), mp_text("MP-22.2", "echo failing >&2; exit 3")):
        inbox.write_text(text)
        subprocess.run([PYTHON, "-m", "mp_engine", "once", "--root", str(ws)], env=env, capture_output=True)
    subprocess.run([PYTHON, "-m", "mp_engine", "approve", "--root", str(ws)], env=env, capture_output=True, check=True)
    return sorted(p for p in (ws / "SYSTEM" / "runs").iterdir() if p.is_dir())


def grow(ws: Path, template: list[Path], runs: int, events_bytes: int) -> None:
    """`runs` archived runs (copies of `template`), their results.jsonl lines (rotated at 1
    MiB as the engine does), and `events_bytes` of event history in 10 MiB files."""
    root = ws / "SYSTEM" / "runs"
    for p in list(root.iterdir()):
        if p.is_dir():
            shutil.rmtree(p)
    lines = []
    for i in range(runs):
        src = template[i % len(template)]
        name = f"2026{1 + i // 86400 % 12:02d}{1 + i // 3600 % 24:02d}T{i // 3600 % 24:02d}{i // 60 % 60:02d}{i % 60:02d}Z-MP-9.{i}"
        shutil.copytree(src, root / name, copy_function=os.link)  # the same bytes: links, made in seconds
        doc = json.loads((src / "result.json").read_text())
        lines.append(
            json.dumps(
                {
                    "mp_id": f"MP-9.{i}",
                    "mp_sha256": doc.get("mp_sha256"),
                    "status": doc["status"],
                    "finished_at": doc.get("finished_at"),
                    "run_id": name,
                    "summary": None,
                }
            )
        )
    write_index(ws / "SYSTEM", lines)
    state = json.loads((ws / "SESSION_STATE.json").read_text())
    newest = sorted(p.name for p in root.iterdir() if p.is_dir())[-1]
    state["last_result"] = {**(state.get("last_result") or {}), "run_id": newest, "mp_id": newest.split("Z-", 1)[1]}
    (ws / "SESSION_STATE.json").write_text(json.dumps(state, indent=2))
    write_events(ws / "SYSTEM" / ".engine", events_bytes)


def write_index(system: Path, lines: list[str]) -> None:
    current: list[str] = []
    size = 0
    for line in lines:
        if size + len(line) + 1 > 2**20:
            (system / "results.1.jsonl").write_text("\n".join(current) + "\n")
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    (system / "results.jsonl").write_text("\n".join(current) + "\n")


def write_events(local: Path, total: int) -> None:
    """`total` bytes of the engine's own event lines, newest in events.jsonl."""
    sample = [ln for ln in (local / "events.jsonl").read_text().splitlines() if ln.strip()]
    block = ("\n".join(sample) + "\n").encode()
    for p in local.glob("events.jsonl.*"):
        p.unlink()
    files = max(1, -(-total // EVENTS_FILE_MAX))
    for n in range(files - 1, -1, -1):
        size = min(EVENTS_FILE_MAX, total - n * EVENTS_FILE_MAX) if n == 0 else EVENTS_FILE_MAX
        path = local / ("events.jsonl" if n == 0 else f"events.jsonl.{n}")
        with open(path, "wb") as f:
            for _ in range(max(1, size // len(block))):
                f.write(block)


def cli_ms(ws: Path, env: dict[str, str], *args: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([PYTHON, "-m", "mp_engine", *args, "--root", str(ws)], env=env, capture_output=True, check=True)
    return (time.perf_counter() - t0) * 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(ws: Path, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [PYTHON, "-m", "mp_engine", "dashboard", "--root", str(ws), "--listen", f"127.0.0.1:{port}"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, port
        time.sleep(0.05)
    proc.kill()
    raise TimeoutError(f"the dashboard did not listen; see {log}")


def http_ms(port: int, path: str) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    t0 = time.perf_counter()
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    ms = (time.perf_counter() - t0) * 1000
    conn.close()
    assert resp.status == 200, (path, resp.status, body[:200])
    return ms


def run(reps: int) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="mpe-bench-scale-") as d:
        base = Path(d)
        env = engine_env(base, MP_ENGINE_ENGINE__SETTLE_SECONDS="0", MP_ENGINE_ARCHIVE__KEEP_RUNS="0")
        seed = init_workspace(base / "seed", env)
        template = real_runs(seed, env)
        small, big = (base / "small", base / "big")
        for ws, runs, events in ((small, SMALL, 0), (big, BIG, EVENTS_BIG)):
            shutil.copytree(seed, ws, symlinks=True)
            if events == 0:  # the history 100 runs make: the seed's, about a hundred times over
                events = (seed / "SYSTEM/.engine/events.jsonl").stat().st_size * SMALL // len(template)
            grow(ws, template, runs, events)
        return measure(small, big, env, base, reps)


def measure(small: Path, big: Path, env: dict[str, str], base: Path, reps: int) -> list[Row]:
    commands = {
        "`mp-engine status`": ("status",),
        "`mp-engine history` (20)": ("history",),
        "`mp-engine logs -n 50`": ("logs", "-n", "50"),
    }
    samples: dict[tuple[str, str], list[float]] = {}
    for _ in range(reps):  # round-robin: drift on a shared machine hits both sides alike
        for name, args in commands.items():
            for side, ws in (("small", small), ("big", big)):
                samples.setdefault((name, side), []).append(cli_ms(ws, env, *args))
    servers = {side: serve(ws, env, base / f"dashboard-{side}.log") for side, ws in (("small", small), ("big", big))}
    pages = {"dashboard state (`/api/v1/state`)": "/api/v1/state", "dashboard history page (`/history`)": "/history"}
    try:
        for path in pages.values():
            for _side, (_proc, port) in servers.items():
                http_ms(port, path)  # warm: the first request reads what the page shows once
        for _ in range(reps):
            for name, path in pages.items():
                for side, (_proc, port) in servers.items():
                    samples.setdefault((name, side), []).append(http_ms(port, path))
    finally:
        for proc, _port in servers.values():
            proc.terminate()
            proc.wait(timeout=30)
    rows = []
    for name in [*commands, *pages]:
        value, baseline = Stat.of(samples[(name, "big")]), Stat.of(samples[(name, "small")])
        rows.append(ratio_row(f"25. {name}, {BIG:,} runs, 50 MiB of events", value, f"{SMALL} runs", baseline, 1.2))
    os.sync()
    return rows
