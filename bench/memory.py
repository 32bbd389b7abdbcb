"""5. Memory and leaks over many MPs, and 7. throughput, with the real daemon.

Trivial MPs (one `true` step) are dropped into the inbox back to back, each after the
previous result: with git on (a local bare remote, every result committed and pushed)
and with git off. We read the daemon's RSS after start and at the end, its open file
descriptors, and whether any child process (a git) lingers.

Import floor: the RSS of a bare interpreter that imported the design card's packages.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import (
    PYTHON,
    Daemon,
    Row,
    Stat,
    StateWatcher,
    children,
    engine_env,
    init_workspace,
    mp_text,
    open_fds,
    rss_mb,
    write_mp,
)
from bench.gitcost import seed_remote

FLOOR = "import watchdog.observers, git, pydantic, structlog, filelock, sys; sys.stdin.read()"


def import_floor_mb() -> float:
    proc = subprocess.Popen([PYTHON, "-c", FLOOR], stdin=subprocess.PIPE)
    try:
        time.sleep(1.5)  # let it finish importing
        return rss_mb(proc.pid)
    finally:
        proc.communicate(b"")


def drive(ws: Path, env: dict[str, str], count: int, log: Path) -> dict:
    """Run `count` MPs through a fresh daemon; return RSS, fds, children and the rate."""
    daemon = Daemon(ws, env, log)
    inbox = ws / "Claude_Inbox" / "incoming_microproject.txt"
    try:
        daemon.wait_online()
        time.sleep(1.0)
        watcher = StateWatcher(ws / "SESSION_STATE.json")
        try:
            rss = [rss_mb(daemon.pid)]
            fds0 = open_fds(daemon.pid)
            warm = min(20, count // 5)
            t_start = None
            for i in range(count + warm):
                if i == warm:
                    rss.append(rss_mb(daemon.pid))  # steady state: after the first MPs
                    t_start = time.perf_counter()
                mp_id = f"MP-{i + 1}.0"
                mark = watcher.mark()
                write_mp(inbox, mp_text(mp_id), "rename")
                watcher.wait(mark, lambda d, m=mp_id: d.get("last_completed") == m, timeout=120)
                deadline = time.monotonic() + 30
                while inbox.exists() and time.monotonic() < deadline:
                    time.sleep(0.001)
            elapsed = time.perf_counter() - t_start
        finally:
            watcher.close()
        time.sleep(1.0)  # let the last push finish
        out = {
            "rss_start": rss[0],
            "rss_steady": rss[1],
            "rss_end": rss_mb(daemon.pid),
            "fds": (fds0, open_fds(daemon.pid)),
            "children": children(daemon.pid),
            "per_min": count / elapsed * 60,
        }
    finally:
        daemon.stop()
    return out


def _measure(count: int) -> tuple[float, dict, dict]:
    with tempfile.TemporaryDirectory(prefix="mpe-bench-mem-") as d:
        base = Path(d)
        env = engine_env(base)
        url = seed_remote(base, "mem")
        on = base / "on"
        subprocess.run(
            [PYTHON, "-m", "mp_engine", "init", "--remote", url, str(on)], env=env, check=True, capture_output=True
        )
        off = init_workspace(base / "off", env)
        git_on = drive(on, env, count, base / "on.log")
        git_off = drive(off, env, max(50, count // 5), base / "off.log")
        return import_floor_mb(), git_on, git_off


_CACHE: dict[int, tuple[float, dict, dict]] = {}


def _results(count: int):
    if count not in _CACHE:
        _CACHE[count] = _measure(count)
    return _CACHE[count]


def _one(v: float) -> Stat:
    return Stat(v, v, 1)


def run(count: int) -> list[Row]:
    floor, on, _off = _results(count)
    growth = on["rss_end"] - on["rss_steady"]
    over_floor = on["rss_end"] - floor
    rows = [
        Row("5. RSS after start, git on", _one(on["rss_start"]), "import floor", _one(floor), "report", None, "MB"),
        Row(
            f"5. RSS after {count} MPs, git on",
            _one(on["rss_end"]),
            "import floor",
            _one(floor),
            "<= floor + 15 MB",
            over_floor <= 15,
            "MB",
        ),
        Row(f"5. RSS growth over {count} MPs (after warm-up)", _one(growth), "-", None, "<= 2 MB", growth <= 2, "MB"),
        Row(
            "5. open fds before/after; lingering children",
            _one(on["fds"][1] - on["fds"][0]),
            "-",
            None,
            "0 new fds, no children",
            on["fds"][1] <= on["fds"][0] and not on["children"],
            "fds",
            note=f"fds {on['fds'][0]} -> {on['fds'][1]}, children: {', '.join(on['children']) or 'none'}",
        ),
    ]
    return rows


def run_throughput(count: int) -> list[Row]:
    _floor, on, off = _results(count)
    return [
        Row("7. throughput, trivial MPs, git on", _one(on["per_min"]), "-", None, "report", None, "MP/min"),
        Row("7. throughput, trivial MPs, git off", _one(off["per_min"]), "-", None, "report", None, "MP/min"),
    ]
