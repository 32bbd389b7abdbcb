"""Where the soak runs: a bare remote served by `git daemon` on loopback (stopped for an
outage; a pre-receive hook that refuses the engine's pushes while a flag exists), the
engine's workspace on a small tmpfs of its own (filled for a moment to make the disk
short; a plain directory where mounting is not allowed, and then no disk fault), the real
daemon as a subprocess (`sys.executable -m mp_engine run`) that a kill -9 and a restart
replace, and a receiver for the engine's alerts that can be down.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "fake_agents"
ENGINE_EMAIL = "engine@soak.invalid"
HOOK = """#!/bin/sh
# The soak's refusal (issue #45): while FLAG exists, a push carrying a commit the engine
# made is declined, as a protected branch or a quota would; the orchestrator's go through.
[ -e "{flag}" ] || exit 0
zero=0000000000000000000000000000000000000000
while read old new ref; do
  [ "$new" = "$zero" ] && continue
  if [ "$old" = "$zero" ]; then range="$new --not --all"; else range="$old..$new"; fi
  if git log --format=%ce $range | grep -qx "{email}"; then
    echo "refused by the soak: this branch takes no push from the engine for a while" >&2
    exit 1
  fi
done
exit 0
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll `predicate` until it is truthy; TimeoutError naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def hermetic_env(home: Path) -> dict[str, str]:
    """The soak's processes: their own HOME and git identity (the orchestrator's), nothing
    of the caller's engine settings."""
    gitconfig = home / ".gitconfig"
    if not gitconfig.exists():
        home.mkdir(parents=True, exist_ok=True)
        gitconfig.write_text(
            "[user]\n\tname = soak orchestrator\n\temail = orchestrator@soak.invalid\n"
            '[init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n[protocol "file"]\n\tallow = always\n'
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MP_ENGINE_", "GIT_"))}
    env.update(HOME=str(home), GIT_CONFIG_GLOBAL=str(gitconfig), GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0")
    env["XDG_CACHE_HOME"] = str(home / "cache")
    return env


def git(cwd: Path, *args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd} ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


class GitServer:
    """`git daemon --enable=receive-pack` serving `base` on 127.0.0.1:port; stop() is an
    outage (connections refused), start() brings it back on the same port."""

    def __init__(self, base: Path, env: dict[str, str]):
        self.base, self.env, self.port = base, env, free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"git://127.0.0.1:{self.port}/remote.git"

    @property
    def up(self) -> bool:
        return self.proc is not None

    def start(self) -> GitServer:
        argv = ["git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack", "--informative-errors"]
        argv += ["--listen=127.0.0.1", f"--port={self.port}", f"--base-path={self.base}", str(self.base)]
        self.proc = subprocess.Popen(
            argv, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        wait_until(
            lambda: subprocess.run(["git", "ls-remote", self.url], env=self.env, capture_output=True).returncode == 0,
            30,
            "git daemon serving",
            0.05,
        )
        return self

    def stop(self) -> None:
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # its forked children too: a real outage
            self.proc.wait(timeout=10)
            self.proc = None


class Disk:
    """The engine's file system: a tmpfs of `size` bytes at `path` when mounting works
    here (root), else a plain directory (`reason` says why, and `mounted` is false)."""

    def __init__(self, path: Path, size: int):
        self.path, self.size = path, size
        path.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
        self.mounted = proc.returncode == 0
        self.reason = "" if self.mounted else (proc.stderr.decode(errors="replace").strip() or "mount failed")
        self.filler = path / ".soak-filler"

    def used(self) -> int:
        st = os.statvfs(self.path)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def fill(self) -> int:
        """Take every free byte; returns how many were taken."""
        st = os.statvfs(self.path)
        free = st.f_bavail * st.f_frsize
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            try:
                os.posix_fallocate(fd, 0, free)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
            chunk = b"\0" * 65536  # whatever came free meanwhile
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def release(self) -> None:
        self.filler.unlink(missing_ok=True)

    def close(self) -> None:
        self.release()
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], check=False, capture_output=True)


class Receiver:
    """The engine's alert target: an Apprise `json://` URL posts here; stop() takes it
    down (connections refused), start() brings it back on the same port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.got: list[dict[str, Any]] = []
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.port}/alerts"

    def start(self) -> Receiver:
        got = self.got

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                got.append(json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0)))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            allow_reuse_address = True
            daemon_threads = True

        self.server = Server(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


class Engine:
    """The daemon on the workspace, as a service manager runs it: started, killed with
    SIGKILL, started again; each life's output in its own log file."""

    def __init__(self, root: Path, env: dict[str, str], logs: Path):
        self.root, self.env, self.logs = root, env, logs
        self.proc: subprocess.Popen[bytes] | None = None
        self.lives = 0
        self.down = False  # killed on purpose, not started again yet
        self.lock = threading.Lock()  # the fault thread restarts it; the driver stops it

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> Engine:
        with self.lock:
            self.lives += 1
            with open(self.logs / f"daemon-{self.lives:04d}.log", "wb") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "mp_engine", "run", "--root", str(self.root)],
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.root,
                )
            self.down = False
        return self

    def kill9(self) -> None:
        with self.lock:
            if self.proc is not None:
                self.down = True
                self.proc.send_signal(signal.SIGKILL)
                self.proc.wait(timeout=30)

    def exited(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def died(self) -> int | None:
        """The exit code of a daemon that ended by itself (not killed, not stopped)."""
        with self.lock:
            return None if self.down or self.proc is None else self.proc.poll()

    def stop(self, timeout: float = 60.0) -> int | None:
        with self.lock:
            if self.proc is None:
                return None
            self.down = True
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            return self.proc.returncode


# -- the workspace's configuration -----------------------------------------------------------


def set_keys(text: str, section: str, values: dict[str, Any]) -> str:
    """Replace `key = ...` lines of `[section]` in the template (which lists every key)."""
    start = text.index(f"[{section}]\n")
    end = text.find("\n[", start + 1)
    end = len(text) if end < 0 else end
    block = text[start:end]
    for key, value in values.items():
        line = f"{key} = {toml(value)}"
        block, n = re.subn(rf"^{re.escape(key)} = .*$", line, block, count=1, flags=re.M)
        if n == 0:
            block = block.replace(f"[{section}]\n", f"[{section}]\n{line}\n", 1)
    return text[:start] + block + text[end:]


def toml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml(x) for x in v) + "]"
    return json.dumps(str(v))


def agent_section(state: Path, calls: Path) -> str:
    worker = [str(FAKE / "soaker.py"), "--prompt-file", "{prompt_file}", "--state", str(state), "--log", str(calls)]
    planner = [str(FAKE / "soakplanner.py"), "--prompt-file", "{prompt_file}"]
    agent = {
        "max_parallel": 3,
        "calls_per_hour": 1000000,
        "transient_backoff": 0.5,
        "usage_limit_wait": 5.0,
        "land": "merge",
        "max_iterations": 30,
        "wall_budget": 600.0,
    }
    lines = ["[agent]", *(f"{k} = {toml(v)}" for k, v in agent.items())]
    lines += ["", "[[agent.levels]]", 'name = "soaker"', f"argv = {toml([*worker, '--sleep', '0.3'])}"]
    lines += ["", "[agent.planner]", 'name = "planner"', f"argv = {toml(planner)}"]
    return "\n".join(lines) + "\n"


def configure(root: Path, *, alerts_url: str, state: Path, calls: Path, keep_runs: int) -> None:
    """The soak's mp-engine.toml: short intervals (a long run is many MPs, not long
    waits), a small event log and archive (their bounds are checked), alerts to the
    receiver, the soak's agent and planner."""
    path = root / "mp-engine.toml"
    text = path.read_text()
    text = set_keys(text, "engine", {"poll_interval": 0.25, "settle_seconds": 0.1, "events_max_bytes": 1048576})
    text = set_keys(text, "engine", {"events_keep": 3})
    text = set_keys(text, "watch", {"health_interval": 1.0})
    text = set_keys(text, "execution", {"kill_grace": 1.0})
    text = set_keys(text, "archive", {"keep_runs": keep_runs})
    git_keys = {"poll_interval": 0.25, "heartbeat_interval": 5.0, "push_backoff_max": 1.0, "timeout": 30.0}
    git_keys["refused_retry"] = 1.0  # a refusal lasts seconds here: try again soon, not after 30 s
    text = set_keys(text, "git", git_keys)
    on = ["halt", "blocked", "engine_down", "push_refused", "error", "cancelled"]
    text = set_keys(text, "notify", {"urls": [alerts_url], "on": on, "timeout": 5.0})
    text = text[: text.index("[agent]")] if "[agent]" in text else text
    path.write_text(text + agent_section(state, calls))
    git(root, "config", "user.name", "mp-engine (soak)")
    git(root, "config", "user.email", ENGINE_EMAIL)


def install_hook(bare: Path, flag: Path) -> None:
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(HOOK.format(flag=flag, email=ENGINE_EMAIL))
    hook.chmod(0o755)
