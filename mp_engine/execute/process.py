"""Child processes: started in their own process group with a scrubbed environment,
output streamed to files, and stopped as a whole group on timeout, idle or shutdown.

Output goes to files rather than pipes, so a chatty child can never deadlock us, the
run archive keeps every byte, and a crash of the engine loses nothing already written.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from mp_engine.core import secretenv
from mp_engine.core.errors import ProcessError
from mp_engine.core.pids import children, environ_has, group, is_subreaper, is_zombie, proc, proc_stat

BASE_ENV = ("PATH", "HOME", "LANG")
STOP_NOW_GRACE = 1.0  # seconds between SIGTERM and SIGKILL when a step is stopped on request
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

# Called on every turn of `run_process`'s wait loop (every 50 ms) by the thread that waits
# for the child: the daemon's service supervisor sets it, so a long step keeps the engine's
# liveness (systemd's watchdog, the stall limit) fed while a wedged loop does not. Set with
# `set_heartbeat`; None (the default) costs nothing.
_heartbeat: Callable[[], None] | None = None


def set_heartbeat(fn: Callable[[], None] | None) -> None:
    """Install (or with None remove) the wait-loop heartbeat; see `_heartbeat`."""
    global _heartbeat
    _heartbeat = fn


@dataclass(frozen=True)
class ProcessResult:
    exit_code: int | None  # None when the process was killed by a signal
    signal: int | None
    duration: float
    pid: int
    timed_out: bool = False
    idle_timed_out: bool = False
    interrupted: bool = False  # stopped because the engine is shutting down now
    gave_up: bool = False  # stopped because its output said it could not go on (`give_up`)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not (self.timed_out or self.idle_timed_out or self.interrupted or self.gave_up)


def scrub_env(
    allow: Iterable[str] = (), extra: Mapping[str, str] | None = None, source: Mapping[str, str] | None = None
) -> dict[str, str]:
    """An environment holding only PATH, HOME, LANG, the names in `allow`, and `extra`.
    The names are looked up in `source`, by default the environment with the secrets the
    daemon holds (`secretenv.environ`): `allow` is how a held secret reaches a child."""
    source = secretenv.environ() if source is None else source
    env = {name: source[name] for name in (*BASE_ENV, *allow) if name in source}
    env.setdefault("PATH", DEFAULT_PATH)
    env.update(extra or {})
    return env


def kill_stale_group(pgid: int, started: float | None) -> list[int]:
    """SIGKILL what survives of a process group an earlier engine started; return the pids.

    A dead engine's step keeps running in its own session. Only processes whose group is
    `pgid` and that started no earlier than the recorded leader are touched, so a reused
    pid is never killed."""
    if started is None:
        return []
    return _kill([p.pid for p in group(pgid) if p.started >= started and not p.zombie])


def kill_marked_groups(markers: Sequence[str]) -> list[int]:
    """SIGKILL every process group with a member whose environment holds all of `markers`
    (`MP_RUN_DIR=<run dir>` and `MP_STEP=<step id>`, which a command step gets); return the
    pids.

    An engine killed after spawning a step but before recording its group
    (`Ledger.spawned`) leaves no pgid; the environment still names the run and the step.
    Only same-user processes are readable, and the caller's own group is never touched."""
    own = os.getpgrp()
    groups = set()
    for pid in psutil.pids():
        if environ_has(pid, list(markers)) and (p := proc(pid)) is not None and p.pgid != own:
            groups.add(p.pgid)
    return _kill([p.pid for g in groups for p in group(g) if not p.zombie])


def _kill(pids: Iterable[int]) -> list[int]:
    """SIGKILL each of `pids`; the ones that were still there."""
    killed = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except ProcessLookupError:
            pass
    return killed


def kill_escaped(markers: Sequence[str], since: float | None) -> list[int]:
    """SIGKILL what a finished step left running outside its process group; return the pids.

    In a subreaper (`pids.become_subreaper`: the daemon, on Linux), a descendant that left
    the step's group (`setsid`, a double fork, a daemon) becomes this process's child when
    its parent exits. Those children that started with or after the step's leader
    (`since`) and carry the step's environment markers are killed with everything below
    them, then reaped. Where this process is no subreaper, none can be its child: nothing
    is looked for (psutil finds a process's children by reading every process)."""
    if since is None or not markers or not is_subreaper():
        return []
    roots = []
    for pid in children(os.getpid()):
        p = proc(pid)
        if p and p.started >= since and not p.zombie and environ_has(pid, list(markers)):
            roots.append(pid)
    killed, stack = [], list(roots)
    while stack:
        pid = stack.pop()
        stack += children(pid)
        killed += _kill([pid])
    for pid in roots:  # ours now: reap them, so no zombie is left
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    return killed


def reap_orphans() -> list[int]:
    """Reap this subreaper's zombie children that no `Popen` waits for: orphans that
    exited by themselves (an escaped step process, an ssh connection master). Called
    from the main loop between passes, when the engine has no child of its own running,
    so a `Popen` never loses its exit status to it."""
    reaped = []
    for pid in children(os.getpid()):
        if is_zombie(pid):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    reaped.append(pid)
            except ChildProcessError:
                pass
    return reaped


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _group_alive(pgid: int) -> bool:
    """True while a process of group `pgid` runs. A zombie does not count: one whose
    parent is not this process (a git that codex started and did not wait for, re-parented
    to pid 1 when this is no subreaper) is reaped by someone else, whenever that is, and
    would otherwise keep the group looking alive for the whole grace period."""
    if not _signal_group(pgid, 0):
        return False
    return any(not p.zombie for p in group(pgid))


def _reap_group(pgid: int) -> None:
    """Reap this process's zombie children in group `pgid`: members of a step's group
    whose parent exited were re-parented to us (a subreaper) and would keep the group
    looking alive."""
    for pid in children(os.getpid()):
        p = proc(pid)
        if p and p.pgid == pgid and p.zombie:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def stop_group(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM the child's whole group, then SIGKILL whatever is left after `grace`. Also
    what ends a step's background jobs (`server &`) once the step itself has exited."""
    pgid = proc.pid
    if proc.returncode is not None and _signal_group(pgid, 0):
        _reap_group(pgid)  # members re-parented to us (a subreaper) that already exited
    if proc.returncode is not None and not _group_alive(pgid):
        return  # the usual case: the step exited and left nothing running in its group
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader so a zombie does not look alive
        _reap_group(pgid)
        if not _group_alive(pgid):
            break
        time.sleep(0.02)
    _signal_group(pgid, signal.SIGKILL)
    proc.wait()
    _reap_group(pgid)


def _total_size(paths: Sequence[Path]) -> int:
    total = 0
    for p in paths:
        try:
            total += p.stat().st_size
        except FileNotFoundError:
            pass
    return total


class ExitWaiter:
    """Wait for a child's exit with a timeout, woken by the exit itself.

    `Popen.wait(timeout)` polls with sleeps that double up to 50 ms, so a step that exits
    after 2 ms is noticed after ~7 ms. A pidfd (Linux 5.3+) or a kqueue NOTE_EXIT
    (macOS, BSD) becomes ready the moment the child exits; elsewhere this falls back to
    `Popen.wait(timeout)`."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self._close: Callable[[], None] = lambda: None
        self._ready: Callable[[float], bool] | None = None
        if hasattr(os, "pidfd_open"):
            try:
                fd = os.pidfd_open(proc.pid)
            except OSError:  # an old kernel, or seccomp: fall back
                fd = -1
            if fd >= 0:
                poller = select.poll()
                poller.register(fd, select.POLLIN)
                self._ready = lambda timeout: bool(poller.poll(timeout * 1000))
                self._close = lambda: os.close(fd)
                return
        # kqueue: macOS and the BSDs. The platform test first: mypy checks for Linux, where
        # `select` has no kqueue, and skips the block instead of failing on it.
        if sys.platform != "linux" and hasattr(select, "kqueue"):
            kq = select.kqueue()
            event = select.kevent(
                proc.pid,
                filter=select.KQ_FILTER_PROC,
                flags=select.KQ_EV_ADD | select.KQ_EV_ONESHOT,
                fflags=select.KQ_NOTE_EXIT,
            )
            try:
                kq.control([event], 0, 0)
            except OSError:  # ESRCH: it has already exited
                kq.close()
                self._ready = lambda timeout: True
                return
            self._ready = lambda timeout: bool(kq.control(None, 1, timeout))
            self._close = kq.close

    def wait(self, timeout: float) -> bool:
        """True once the child has exited (and is reaped), False after `timeout` seconds."""
        if self._ready is None:
            try:
                self.proc.wait(timeout=timeout)
                return True
            except subprocess.TimeoutExpired:
                return False
        if not self._ready(timeout):
            return False
        self.proc.wait()  # it has exited: reaping does not block
        return True

    def close(self) -> None:
        self._close()


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    stdout_path: Path,
    stderr_path: Path,
    stop_now: threading.Event | None = None,
    idle_timeout: float | None = None,
    kill_grace: float = 5.0,
    stdin_path: Path | None = None,
    on_spawn: Callable[[int], None] | None = None,
    markers: Sequence[str] = (),
    give_up: Callable[[], bool] | None = None,
) -> ProcessResult:
    """Run `argv` to completion or until a limit; never raises for the child's failures.
    `markers` (`NAME=value` entries of `env`): what `kill_escaped` looks for when the
    child has ended, to kill its descendants that left its process group. `give_up`, asked
    whenever the output grew: true stops the process as a timeout would (it waits for what
    cannot come).
    Long because the start, the watch loop (timeout, idle, stop) and the kill of the group
    share the process's state; split, each piece would need all of it."""
    start = time.monotonic()
    with open(stdout_path, "ab") as out, open(stderr_path, "ab") as err:
        stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=dict(env),
                stdin=stdin,
                stdout=out,
                stderr=err,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as e:
            raise ProcessError(f"could not start {argv[0]!r}: {e.strerror or e}") from e
        finally:
            if not isinstance(stdin, int):  # a file we opened, not DEVNULL
                stdin.close()
    if on_spawn:
        on_spawn(proc.pid)
    leader = proc_stat(proc.pid) if markers else None
    deadline = start + timeout
    outputs = (stdout_path, stderr_path)
    last_size, last_activity = 0, start
    timed_out = idle = interrupted = gave_up = False
    waiter = ExitWaiter(proc)
    try:
        while not waiter.wait(0.05):
            if _heartbeat is not None:
                _heartbeat()
            now = time.monotonic()
            if stop_now is not None and stop_now.is_set():
                interrupted = True
            elif now >= deadline:
                timed_out = True
            elif idle_timeout is not None or give_up is not None:
                size = _total_size(outputs)
                if size != last_size:
                    last_size, last_activity = size, now
                    gave_up = give_up is not None and give_up()
                elif idle_timeout is not None and now - last_activity >= idle_timeout:
                    idle = True
            if timed_out or idle or interrupted or gave_up:
                # Stopped now (a cancel, a second signal): at most STOP_NOW_GRACE for
                # SIGTERM, so the group is gone within a second or two, whatever it traps.
                stop_group(proc, min(kill_grace, STOP_NOW_GRACE) if interrupted else kill_grace)
                break
    finally:
        waiter.close()
    if not (timed_out or idle or interrupted or gave_up):
        stop_group(proc, kill_grace)  # background jobs the step left in its group
    if leader is not None:
        kill_escaped(markers, leader[1])
    rc = proc.returncode
    return ProcessResult(
        exit_code=rc if rc >= 0 else None,
        signal=-rc if rc < 0 else None,
        duration=round(time.monotonic() - start, 3),  # ms: the rest is float noise in every log line
        pid=proc.pid,
        timed_out=timed_out,
        idle_timed_out=idle,
        interrupted=interrupted,
        gave_up=gave_up,
    )
