"""`mp-engine once` on a task's workspace, in a process of its own: the real pipeline, nothing
special-cased, one process per task so that N run at once without sharing an engine.

The processes come from a fork server that has imported the engine once: a fresh interpreter
per task would spend a second or more importing it (bench figure 8), which would show as the
engine's overhead on every task though no engine runs it. Each child is `once`'s own body
(commands/once.py) behind the command line's error boundary, in a session of its own, its
output in the task's logs.

Stopping follows the engine's rules: the eval's first signal asks every `once` to checkpoint
(SIGTERM: the running step finishes, the MP resumes on the next start), the second stops them
now. A `once` left running by an eval that was killed (`kill -9`) still holds its workspace's
daemon lock; the resumed eval stops it (`clear_orphan`), and its own `once` then recovers the
run from the ledger, as after any crash.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from mp_engine.core.lock import daemon_alive, daemon_owner
from mp_engine.core.pids import is_zombie, pid_alive
from mp_engine.core.workspace import Workspace

SIGNAL_GAP = 0.3  # between the first and the second signal to a `once`
KILL_GRACE = 10.0
ORPHAN_WAIT = 30.0
# The engine as `once` imports it, and what an agent run imports only when it needs it (the
# lock's library, the repository map's parsers): each would otherwise be imported again by
# every task's process.
PRELOAD = ["mp_engine.commands.once", "mp_engine.eval.child", "filelock", "tree_sitter_language_pack"]
_CONTEXT_LOCK = threading.Lock()
Context = multiprocessing.context.ForkServerContext | multiprocessing.context.SpawnContext
_context: Context | None = None


def context() -> Context:
    """The fork server (started on first use, with the engine imported), or plain spawn
    where a platform has none."""
    global _context
    with _CONTEXT_LOCK:
        if _context is None:
            if "forkserver" in multiprocessing.get_all_start_methods():
                server = multiprocessing.get_context("forkserver")
                server.set_forkserver_preload(PRELOAD)
                _context = server
            else:  # pragma: no cover - Windows
                _context = multiprocessing.get_context("spawn")
        return _context


def warm() -> None:
    """Start the fork server now (it imports the engine: seconds), so no task's time holds it."""
    proc = context().Process(target=os.getpid)
    proc.start()
    proc.join()


class Children:
    """The `once` processes running now (each leads its own process group)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: set[int] = set()

    def add(self, pgid: int) -> None:
        with self._lock:
            self._groups.add(pgid)

    def remove(self, pgid: int) -> None:
        with self._lock:
            self._groups.discard(pgid)

    def checkpoint_all(self) -> int:
        """SIGTERM to each: finish the step, checkpoint, exit. Returns how many were asked."""
        with self._lock:
            groups = list(self._groups)
        for pgid in groups:
            _signal(pgid, signal.SIGTERM)
        return len(groups)


@dataclass(frozen=True)
class OnceRun:
    exit_code: int | None  # None: killed by a signal
    wall: float
    summary: str  # once's last line: what it did


def run_once(
    ws_root: Path, env: dict[str, str], logs: Path, children: Children, stop_now: threading.Event | None
) -> OnceRun:
    """`mp-engine once --root WS` with `env` added to this process's environment; its output
    in `logs/once.out` and `.err`. Returns when it has exited (after a second signal: at most
    KILL_GRACE later)."""
    logs.mkdir(parents=True, exist_ok=True)
    full = {**os.environ, **env}
    start = time.monotonic()
    proc = context().Process(target=once_in_child, args=(str(ws_root), full, str(logs)), daemon=False)
    proc.start()
    assert proc.pid is not None
    children.add(proc.pid)
    try:
        while not multiprocessing.connection.wait([proc.sentinel], timeout=0.1):
            if stop_now is not None and stop_now.is_set():
                _stop_now(proc)
                break
        proc.join()
    finally:
        children.remove(proc.pid)
    lines = (logs / "once.out").read_text(errors="replace").strip().splitlines() if (logs / "once.out").exists() else []
    code = proc.exitcode
    return OnceRun(
        code if code is not None and code >= 0 else None, round(time.monotonic() - start, 3), lines[-1] if lines else ""
    )


def _stop_now(proc: multiprocessing.process.BaseProcess) -> None:
    """`once`'s own second signal (it kills the running agent's or step's process group,
    which is not in `once`'s session), then SIGKILL if it has not exited within KILL_GRACE:
    a SIGKILL alone would leave the agent running."""
    assert proc.pid is not None
    _signal(proc.pid, signal.SIGTERM)
    proc.join(SIGNAL_GAP)  # two signals at once may arrive as one
    if proc.exitcode is None:
        _signal(proc.pid, signal.SIGTERM)
        proc.join(KILL_GRACE)
    if proc.exitcode is None:
        _signal(proc.pid, signal.SIGKILL)


def _signal(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def once_in_child(root: str, environ: dict[str, str], logs: str) -> None:
    """The child: a session of its own (a signal to its group reaches it and nothing of the
    eval's), the environment the eval gives it, its output in the logs, then exactly what
    `mp-engine once --root ROOT` runs, behind the same error boundary as the command line."""
    os.setsid()
    for fd, name in ((1, "once.out"), (2, "once.err")):
        target = os.open(os.path.join(logs, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - the process's own stdout
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    os.environ.clear()
    os.environ.update(environ)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # once installs its own handlers
    from mp_engine.commands.once import once
    from mp_engine.core.errors import MpEngineError
    from mp_engine.core.exitcodes import for_error
    from mp_engine.record import logs as logging_setup

    logging_setup.configure("warning")
    try:
        code = int(once(Path(root), print))
    except MpEngineError as e:
        print(f"mp-engine: {e}", file=sys.stderr)
        code = int(for_error(e))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def clear_orphan(ws_root: Path) -> int | None:
    """Stop the `once` an earlier, killed eval left running on this workspace (it holds the
    daemon lock, so ours could not start); returns its pid, or None when there was none."""
    lock = Workspace.at(ws_root).daemon_lock_file
    if not daemon_alive(lock):
        return None
    owner = daemon_owner(lock) or {}
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid == os.getpid() or owner.get("mode") != "once":
        return None
    _signal(pid, signal.SIGKILL)  # its own session: `once`, not its agent's process groups
    deadline = time.monotonic() + ORPHAN_WAIT
    while (daemon_alive(lock) or (pid_alive(pid) and not is_zombie(pid))) and time.monotonic() < deadline:
        time.sleep(0.05)  # the kernel drops the lock as the process dies: moments
    return pid
