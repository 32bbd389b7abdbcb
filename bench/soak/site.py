"""One soak's world, built and torn down in one place: its directories, the engine's file
system, the remote and its server, the engine's workspace and daemon, the alert receiver,
and the views the driver and the checker read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.soak.faults import agent_calls
from bench.soak.observe import HostView, RemoteView
from bench.soak.world import Disk, Engine, GitServer, Receiver, configure, git, hermetic_env, install_hook

KEEP_RUNS = 100


class Site:
    def __init__(self, base: Path, disk_bytes: int):
        self.base = base
        self.home = base / "home"
        self.env = hermetic_env(self.home)
        self.logs = base / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.steps_log = self.home / "soak-steps.log"
        self.calls_log = base / "agent-calls.jsonl"
        self.disk = Disk(base / "disk", disk_bytes)
        self.root = self.disk.path / "engine"
        self.runs_prefix = str(self.root / "SYSTEM" / "runs") + "/"
        srv = base / "srv"
        srv.mkdir(exist_ok=True)
        self.bare = srv / "remote.git"
        git(base, "init", "--quiet", "--bare", "-b", "main", str(self.bare), env=self.env)
        self.refuse_flag = base / "refuse-pushes"
        install_hook(self.bare, self.refuse_flag)
        self.server = GitServer(srv, self.env).start()
        self.receiver = Receiver().start()
        self.remote = RemoteView(self.bare, self.env)
        self.host = HostView(self.root)
        self._make_workspace()
        self.engine = Engine(self.root, self.env, self.logs)

    def _make_workspace(self) -> None:
        from mp_engine.sync.setup import setup_remote

        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(self.env)
        try:
            setup_remote(self.root, self.url, "main")
        finally:
            os.environ.clear()
            os.environ.update(saved)
        configure(
            self.root,
            alerts_url=self.receiver.url,
            state=self.base / "agent-state",
            calls=self.calls_log,
            keep_runs=KEEP_RUNS,
        )

    @property
    def url(self) -> str:
        return self.server.url

    def route_env(self, name: str) -> dict[str, str]:
        """A route's environment: its own cache, so its working clone is its own."""
        return {**self.env, "XDG_CACHE_HOME": str(self.home / "cache" / name)}

    # -- reads -----------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        try:
            return json.loads((self.root / "SESSION_STATE.json").read_text())
        except (OSError, ValueError):
            return {}

    def agent_called_since(self, run: str, t: float) -> bool:
        return any(c.get("run") == run and c.get("t0", 0) > t for c in agent_calls(self.calls_log))

    def has_result(self, run: str, t: float) -> bool:
        try:
            return (self.root / "SYSTEM/runs" / run / "result.json").stat().st_mtime > t
        except FileNotFoundError:
            return False

    def host_head(self) -> str:
        return git(self.root, "rev-parse", "HEAD", env=self.env, check=False).strip()

    def unpushed(self) -> bool:
        head = self.host_head()
        return bool(head) and not self.remote.contains(head)

    def disk_used(self) -> int:
        if self.disk.mounted:
            return self.disk.used()
        return sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())

    def remote_bytes(self) -> int:
        """The remote's object store (loose and packed), as git counts it."""
        out = git(self.bare, "count-objects", "-v", env=self.env, check=False)
        sizes = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
        return (int(sizes.get("size", 0)) + int(sizes.get("size-pack", 0))) * 1024

    # -- the end ---------------------------------------------------------------------------

    def close(self, keep: bool) -> None:
        self.engine.stop()
        self.receiver.stop()
        self.server.stop()
        if keep:  # a copy of the workspace for the post-mortem, off the tmpfs
            shutil.copytree(self.root, self.base / "engine-copy", symlinks=True, dirs_exist_ok=True)
        self.disk.close()
        if not keep:
            shutil.rmtree(self.base, ignore_errors=True)


def wait_idle(site: Site, timeout: float) -> None:
    """The engine idle with nothing left to push: ONLINE, no run, the remote has its HEAD."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = site.state()
        if st.get("status") == "ONLINE" and not st.get("run_id") and not site.unpushed():
            return
        time.sleep(0.2)
    raise TimeoutError(f"the engine did not go idle in {timeout:g} s: {site.state()}")


def git_lines(root: Path, env: dict[str, str], *args: str) -> list[str]:
    proc = subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, text=True)
    return proc.stdout.splitlines() if proc.returncode == 0 else []
