"""What every benchmark shares: statistics, the result row, raw inotify, /proc readings,
a real daemon as a subprocess, and a hermetic git environment.

Nothing here asserts a time: each figure is reported beside a baseline measured in the
same run, and the table says whether the ratio meets its target.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable

# -- statistics ------------------------------------------------------------------------


@dataclass(frozen=True)
class Stat:
    """Median and p95 of a sample, in the unit of the samples."""

    median: float
    p95: float
    n: int

    @classmethod
    def of(cls, samples: list[float]) -> Stat:
        if not samples:
            raise ValueError("no samples")
        ordered = sorted(samples)
        # nearest-rank p95: the smallest value with at least 95% of samples at or below it
        rank = max(1, -(-95 * len(ordered) // 100))
        return cls(statistics.median(ordered), ordered[rank - 1], len(ordered))

    def scaled(self, factor: float) -> Stat:
        return Stat(self.median * factor, self.p95 * factor, self.n)


@dataclass
class Row:
    """One line of the results table.

    `value` and `baseline` are Stats in `unit`; the ratio compares medians. `target` is a
    ratio ("<= 3x") or, for figures that have no baseline process (idle CPU, memory), an
    absolute bound checked by `met`.
    """

    figure: str
    value: Stat | None
    baseline_name: str
    baseline: Stat | None
    target: str
    met: bool | None
    unit: str = "ms"
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.value is None or self.baseline is None or self.baseline.median == 0:
            return None
        return self.value.median / self.baseline.median


def ratio_row(figure: str, value: Stat, baseline_name: str, baseline: Stat, limit: float, unit: str = "ms") -> Row:
    row = Row(figure, value, baseline_name, baseline, f"<= {limit:g}x", None, unit)
    row.met = row.ratio is not None and row.ratio <= limit
    return row


def info_row(figure: str, value: Stat, baseline_name: str = "-", baseline: Stat | None = None, unit: str = "ms") -> Row:
    """A reported figure without a target of its own (context for another row)."""
    return Row(figure, value, baseline_name, baseline, "report", None, unit)


def _fmt(stat: Stat | None, unit: str) -> str:
    if stat is None:
        return "-"
    digits = 2 if unit in ("ms", "MB", "%") else 1
    return f"{stat.median:.{digits}f} / {stat.p95:.{digits}f}"


def table(rows: list[Row]) -> str:
    lines = [
        "| figure | median / p95 | baseline | baseline median / p95 | ratio | target | met |",
        "|---|---:|---|---:|---:|---|---|",
    ]
    for r in rows:
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else "-"
        met = {True: "yes", False: "**no**", None: "-"}[r.met]
        note = f" ({r.note})" if r.note else ""
        lines.append(
            f"| {r.figure}{note} | {_fmt(r.value, r.unit)} {r.unit} | {r.baseline_name} | "
            f"{_fmt(r.baseline, r.unit) + ' ' + r.unit if r.baseline else '-'} | {ratio} | {r.target} | {met} |"
        )
    return "\n".join(lines)


# -- raw inotify (the physical floor of "notice a file") --------------------------------

IN_CLOSE_WRITE = 0x00000008
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
_EVENT = struct.Struct("iIII")

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


class Inotify:
    """A blocking inotify descriptor: `events()` yields (mask, name) as the kernel reports them."""

    def __init__(self, directory: Path, mask: int):
        self.fd = _libc.inotify_init1(os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        if _libc.inotify_add_watch(self.fd, os.fsencode(directory), mask) < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {directory}")

    def events(self):
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except OSError:
                return  # closed
            offset = 0
            while offset < len(buf):
                _wd, mask, _cookie, length = _EVENT.unpack_from(buf, offset)
                name = buf[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0").decode()
                offset += _EVENT.size + length
                yield mask, name

    def close(self) -> None:
        os.close(self.fd)


class StateWatcher:
    """Timestamps every new version of a JSON state file the moment it is renamed into place.

    The same observer is used for the daemon and for every baseline, so its own wake-up
    cost is in both sides of each ratio.
    """

    def __init__(self, state_file: Path):
        self.path = state_file
        self._ino = Inotify(state_file.parent, IN_MOVED_TO | IN_CLOSE_WRITE)
        self._cond = threading.Condition()
        self._seen: list[tuple[float, dict[str, Any]]] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for _mask, name in self._ino.events():
            if name != self.path.name:
                continue
            t = time.perf_counter()
            try:
                data = json.loads(self.path.read_text())
            except (OSError, ValueError):
                continue
            with self._cond:
                self._seen.append((t, data))
                self._cond.notify_all()

    def mark(self) -> int:
        with self._cond:
            return len(self._seen)

    def wait(self, since: int, predicate: Callable[[dict[str, Any]], bool], timeout: float = 60.0) -> float:
        """perf_counter time of the first state after index `since` that satisfies `predicate`."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for t, data in self._seen[since:]:
                    if predicate(data):
                        return t
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no state matching the predicate within {timeout} s in {self.path}")
                self._cond.wait(left)

    def close(self) -> None:
        self._ino.close()


def write_mp(path: Path, text: str, how: str) -> float:
    """Write an MP as an orchestrator would; return perf_counter just before close()/rename()."""
    if how == "direct":
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, text.encode())
        t = time.perf_counter()
        os.close(fd)
        return t
    tmp = path.with_name(".incoming.partial")
    tmp.write_text(text)
    t = time.perf_counter()
    os.replace(tmp, path)
    return t


# -- /proc readings --------------------------------------------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime+stime of the process and of its reaped children (git runs as children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(fields[i]) for i in (11, 12, 13, 14))
    return (utime + stime + cutime + cstime) / CLK_TCK


def context_switches(pid: int) -> int:
    """Voluntary context switches over all threads: how often the process woke up."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
        except FileNotFoundError:
            continue
    return total


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def children(pid: int) -> list[str]:
    """Command names of the live child processes of `pid`."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids = (task / "children").read_text().split()
        except FileNotFoundError:
            continue
        for kid in kids:
            try:
                out.append(Path(f"/proc/{kid}/comm").read_text().strip())
            except FileNotFoundError:
                pass
    return out


# -- git -------------------------------------------------------------------------------


def git_env() -> dict[str, str]:
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@invalid",
    }
    return env


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, env=env or git_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc.stdout


def make_remote(base: Path, name: str = "remote.git") -> Path:
    bare = base / name
    git(base, "init", "--quiet", "--bare", "--initial-branch=main", str(bare))
    return bare


# -- the real daemon -------------------------------------------------------------------


def engine_env(home: Path, **settings: str) -> dict[str, str]:
    """Environment for an engine process: hermetic HOME, git identity, config overrides
    (`MP_ENGINE_<SECTION>__<KEY>`)."""
    env = {k: v for k, v in git_env().items() if not k.startswith("MP_ENGINE_")}
    env["HOME"] = str(home)
    env.update(settings)
    return env


def init_workspace(path: Path, env: dict[str, str], *extra: str) -> Path:
    subprocess.run([PYTHON, "-m", "mp_engine", "init", *extra, str(path)], env=env, check=True, capture_output=True)
    return path


def executable(path: Path, text: str) -> Path:
    """A script file the bench runs as a program."""
    path.write_text(text)
    path.chmod(0o755)
    return path


def agent_workspace(
    path: Path, env: dict[str, str], agent_toml: str, populate: Callable[[Path], None] | None = None
) -> Path:
    """A workspace whose `[agent]` section is `agent_toml`, a git repository with one commit
    (an agent MP works on a branch of its own); `populate` adds the project's files first."""
    ws = init_workspace(path, env)
    cfg = ws / "mp-engine.toml"
    text = cfg.read_text()
    cfg.write_text((text[: text.index("[agent]")] if "[agent]" in text else text) + agent_toml)
    if populate is not None:
        populate(ws)
    genv = git_env()
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-qm", "layout")):
        git(ws, *args, env=genv)
    return ws


@contextlib.contextmanager
def engine_in_process(ws: Path, env: dict[str, str]) -> Iterator[Any]:
    """The engine in this process (`Engine.tick()`, as the daemon's loop calls it), with
    `env` as the whole environment meanwhile."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        from mp_engine.config.load import load_config
        from mp_engine.core.workspace import Workspace
        from mp_engine.pipeline.engine import Engine

        config = load_config(ws)
        # With [fleet], as the daemon builds it (its connection to Temporal); else bare.
        engine = Engine.build(Workspace(ws), config) if config.fleet.enabled else Engine(Workspace(ws), config)
        engine.start(daemon=False)
        try:
            yield engine
        finally:
            engine.shutdown()
    finally:
        os.environ.clear()
        os.environ.update(saved)


class Daemon:
    """`mp-engine run` as a subprocess, as systemd would start it."""

    def __init__(self, root: Path, env: dict[str, str], log: Path):
        self.root = root
        self.log = log
        self._out = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "mp_engine", "run", "--root", str(root)],
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_online(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        state = self.root / "SESSION_STATE.json"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited {self.proc.returncode}; see {self.log}")
            try:
                data = json.loads(state.read_text())
                if data.get("status") == "ONLINE" and (data.get("daemon") or {}).get("pid") == self.pid:
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.02)
        raise TimeoutError(f"daemon not ONLINE within {timeout} s; see {self.log}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


def mp_text(mp_id: str, command: str = "true") -> str:
    return f"# {mp_id} bench\n\n```bash\n{command}\n```\n"
