"""Shared fixtures: a hermetic environment, fresh workspaces, and the real daemon.

Every test runs with HOME, git's global config and the engine's environment overrides
pointed at its own temporary directory, so nothing reads or writes the developer's files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mp_engine.core.lock import daemon_alive, daemon_owner
from mp_engine.core.workspace import Workspace, init_workspace

REPO_ROOT = Path(__file__).resolve().parent.parent

# Fast settings for tests; the defaults are tuned for people, not for CI.
FAST_ENV = {
    "MP_ENGINE_ENGINE__POLL_INTERVAL": "0.2",
    "MP_ENGINE_ENGINE__SETTLE_SECONDS": "0.3",
    "MP_ENGINE_ENGINE__LOCK_TIMEOUT": "2",
    "MP_ENGINE_WATCH__POLLING_INTERVAL": "0.1",
    "MP_ENGINE_WATCH__HEALTH_INTERVAL": "0.2",
    "MP_ENGINE_EXECUTION__KILL_GRACE": "1",
}


def wait_for(
    predicate: Callable[[], Any],
    timeout: float = 20.0,
    interval: float = 0.02,
    what: str | Callable[[], str] = "condition",
):
    """Poll `predicate` until it returns something truthy; fail the test at the deadline.

    This is the one place tests wait: for a condition, with a deadline, never for a fixed time.
    `what` may be a callable, evaluated only on failure (to attach logs).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what() if callable(what) else what}")
        time.sleep(interval)


@pytest.fixture(autouse=True)
def hermetic_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    gitconfig = home / ".gitconfig"
    gitconfig.write_text(
        "[user]\n\tname = mp-engine tests\n\temail = tests@mp-engine.invalid\n"
        '[init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n[protocol "file"]\n\tallow = always\n'
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")
    for name in list(os.environ):  # the conformance suite's cache and versions are the runner's, not the engine's
        if name.startswith("MP_ENGINE_") and not name.startswith("MP_ENGINE_CONFORMANCE_"):
            monkeypatch.delenv(name)
    for name, value in FAST_ENV.items():
        monkeypatch.setenv(name, value)
    return home


@pytest.fixture(autouse=True)
def _no_subreaper_in_the_test_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    """`once` run in-process must not make pytest a child subreaper for the rest of the
    session (every orphan of every later test would become its child). The real `once`
    and `run` are subprocesses in the e2e tests, where it is what they do."""
    monkeypatch.setattr("mp_engine.commands.once.become_subreaper", lambda: False)


def daemon_on(root: Path) -> str | None:
    """Why the suite cannot run beside the daemon that serves `root` (`make run` in the
    same clone), or None when none does."""
    lock = Workspace.at(root).daemon_lock_file
    if not daemon_alive(lock):
        return None
    owner = daemon_owner(lock) or {}
    pid = owner.get("pid", "?")
    return (
        f"an mp-engine daemon (pid {pid}, started {owner.get('started_at', '?')}) runs on this checkout, {root} "
        "(`make run`?). It writes SESSION_STATE.json, and the suite checks that no test changes that file. "
        f"Stop it (Ctrl-C where it runs, or `kill {pid}`), then run the tests again."
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    # Before any test: beside a daemon the check below would blame tests for the daemon's
    # writes, after the whole suite had run (issue #44).
    if (why := daemon_on(REPO_ROOT)) is not None:
        pytest.exit(why, returncode=pytest.ExitCode.INTERRUPTED)


@pytest.fixture(autouse=True)
def _repo_state_untouched() -> Iterator[None]:
    """No test may change this repository's own workspace files."""
    state = REPO_ROOT / "SESSION_STATE.json"
    before = state.read_bytes() if state.exists() else None
    yield
    after = state.read_bytes() if state.exists() else None
    assert before == after, "a test modified the repository's own SESSION_STATE.json"


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace, _ = init_workspace(tmp_path / "ws")
    return workspace


def drop(ws: Workspace, text: str | bytes, *, how: str = "rename") -> Path:
    """Put an MP into the inbox as an orchestrator would: write a temp file, rename it in."""
    data = text.encode() if isinstance(text, str) else text
    target = ws.inbox_file
    if how == "rename":
        tmp = ws.inbox_dir / ".incoming.partial"
        tmp.write_bytes(data)
        os.replace(tmp, target)
    else:
        target.write_bytes(data)
    return target


def fsynced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths os.fsync is called on from now on (files and directories, temp files by
    their temp names): the durability tests read what was made to survive a power loss."""
    paths: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return paths


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped (a crashed writer's pid)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def read_state(ws: Workspace) -> dict[str, Any]:
    return json.loads(ws.state_file.read_text())


def events(ws: Workspace, name: str | None = None) -> list[dict[str, Any]]:
    if not ws.events_file.exists():
        return []
    out = [json.loads(line) for line in ws.events_file.read_text().splitlines() if line.strip()]
    return [e for e in out if name is None or e["event"] == name]


def result_field(ws: Workspace, key: str) -> str | None:
    """A `Key: value` header line of RESULT_last.md."""
    if not ws.result_file.exists():
        return None
    for line in ws.result_file.read_text().splitlines():
        if line.startswith(f"{key}: "):
            return line.split(": ", 1)[1].strip()
    return None


class Daemon:
    """`python -m mp_engine run` as a real subprocess, with its output kept for failures."""

    def __init__(self, root: Path, log_dir: Path, env: dict[str, str] | None = None, name: str = "daemon"):
        self.root = root
        self.log = log_dir / f"{name}.log"
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None

    def start(self, *extra: str) -> Daemon:
        self._logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mp_engine", *extra, "run", "--root", str(self.root)],
            stdout=self._logf,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.root,
        )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 20.0) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"daemon did not exit within {timeout} s; log:\n{self.output()}")

    def kill9(self) -> None:
        self.signal(signal.SIGKILL)
        self.wait()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if getattr(self, "_logf", None):
            self._logf.close()


@pytest.fixture
def daemon_factory(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    started: list[Daemon] = []

    def make(root: Path, env: dict[str, str] | None = None, name: str = "daemon") -> Daemon:
        d = Daemon(root, tmp_path, env, name=f"{name}{len(started)}")
        started.append(d)
        return d

    yield make
    for d in started:
        d.close()
