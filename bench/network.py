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
        self._loop.set_exception_handler(lambda _loop, _ctx: None)  # cancelled handlers: expected
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
        try:
            await asyncio.gather(
                self._pump(c_reader, s_writer, state, from_client=True),
                self._pump(s_reader, c_writer, state, from_client=False),
                return_exceptions=True,
            )
        finally:  # also when stop() cancels it: the server must see the connection end
            s_writer.close()
            c_writer.close()

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
    _wait_port(proc, port)
    return proc, port


def _sshd(base: Path) -> tuple[subprocess.Popen, int, str]:
    """sshd on 127.0.0.1 with a generated host key and one authorized user key; returns
    the process, its port and the ssh command a client uses (without sharing options)."""
    for name in ("host_key", "user_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(base / name)], check=True)
    (base / "authorized_keys").write_text((base / "user_key.pub").read_text())
    port = _free_port()
    cfg = base / "sshd_config"
    cfg.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {base / 'host_key'}\n"
        f"AuthorizedKeysFile {base / 'authorized_keys'}\nPasswordAuthentication no\n"
        f"KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPermitRootLogin yes\n"
        f"PidFile {base / 'sshd.pid'}\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation directory
    proc = subprocess.Popen(
        [shutil.which("sshd") or "/usr/sbin/sshd", "-D", "-e", "-f", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait_port(proc, port)
    ssh = f"ssh -i {base / 'user_key'} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
    return proc, port, ssh


def _wait_port(proc: subprocess.Popen, port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    proc.kill()
    raise RuntimeError(f"server on port {port} did not start")


def _measure(
    base: Path, proxy: DelayProxy, urls: dict[str, tuple[str, str]], kinds: dict, ssh: dict[str, str], reps: int
) -> dict[str, dict[str, Stat]]:
    """Alternate the sides over `reps` MPs; per side, Stats of wall ms, round trips and
    connections. `urls[kind]` = (the engine's URL, through the link; the orchestrator's)."""
    import os

    sides = {}
    for kind, cls in kinds.items():
        linked, direct = urls[kind]
        if kind in ssh:
            os.environ["GIT_SSH_COMMAND"] = ssh[kind]
        sides[kind] = (cls(base, linked, f"{kind}-ws"), _orchestrator(base, direct, f"{kind}-orch"))
    samples: dict[str, dict[str, list[float]]] = {k: {"wall": [], "trips": [], "conns": []} for k in kinds}
    for i in range(reps + 1):
        for kind, (side, orch) in sides.items():
            if kind in ssh:
                os.environ["GIT_SSH_COMMAND"] = ssh[kind]
            _push_mp(orch, mp_text(f"MP-{i + 1}.0"))
            proxy.reset()
            elapsed, step = side.one()
            trips, conns = proxy.reset()
            if i > 0:
                samples[kind]["wall"].append((elapsed - step) * 1000)
                samples[kind]["trips"].append(trips)
                samples[kind]["conns"].append(conns)
    os.environ.pop("GIT_SSH_COMMAND", None)
    return {k: {m: Stat.of(v) for m, v in s.items()} for k, s in samples.items()}


def _rows(
    title: str, st: dict[str, dict[str, Stat]], engine: str, floor: str, floor_name: str, *, targets: bool = True
) -> list[Row]:
    """Wall time and round trips against the floor (with their targets, or as context
    only for a configuration the engine does not use), and the connections."""

    def row(what: str, metric: str, limit: float | None, unit: str = "ms") -> Row:
        name, value, base = f"{title}: {what}", st[engine][metric], st[floor][metric]
        if targets and limit is not None:
            return ratio_row(name, value, floor_name, base, limit, unit=unit)
        return info_row(name, value, floor_name, base, unit=unit)

    rows = [
        row("push -> result on the remote, minus the step", "wall", 1.15),
        row("network round trips", "trips", 1.0, unit="trips"),
    ]
    if targets:
        rows.append(row("TCP connections", "conns", None, unit="conns"))
    return rows


def run(reps: int) -> list[Row]:
    if not Path(GIT_DAEMON).exists():
        return [info_row("10. trivial MP over a 50 ms link: skipped (git daemon is not installed)", Stat(0, 0, 1))]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="mpe-bench-net-") as d:
        base = Path(d)
        srv = base / "srv"
        srv.mkdir()
        for kind in ("engine", "cli", "engine-ssh", "engine-ssh-noshare", "cli-ssh"):
            seed_remote(srv, kind)  # srv/<kind>.git
        daemon, port = _serve(srv)
        proxy = DelayProxy(port).start()
        try:
            urls = {
                k: (f"git://127.0.0.1:{proxy.port}/{k}.git", f"git://127.0.0.1:{port}/{k}.git")
                for k in ("engine", "cli")
            }
            st = _measure(base, proxy, urls, {"engine": EngineSide, "cli": CliSide}, {}, reps)
            rows += _rows("10. trivial MP over a 50 ms RTT link, git://", st, "engine", "cli", "git CLI by hand")
        finally:
            proxy.stop()
            daemon.terminate()
            daemon.wait(5)
        if shutil.which("sshd") is None and not Path("/usr/sbin/sshd").exists():
            rows.append(info_row("10. the same over ssh: skipped (no sshd on this host)", Stat(0, 0, 1)))
            return rows
        sshd, sport, ssh = _sshd(base)
        proxy = DelayProxy(sport).start()
        try:
            kinds = {"engine-ssh": EngineSide, "engine-ssh-noshare": EngineSide, "cli-ssh": CliSide}
            urls = {k: (f"ssh://root@127.0.0.1:{proxy.port}{srv}/{k}.git", str(srv / f"{k}.git")) for k in kinds}
            noshare = f"{ssh} -o ControlMaster=no"
            cmds = {"engine-ssh": ssh, "engine-ssh-noshare": noshare, "cli-ssh": noshare}
            st = _measure(base, proxy, urls, kinds, cmds, reps)
            title = "10. the same over ssh"
            rows += _rows(
                f"{title}, engine sharing one ssh connection", st, "engine-ssh", "cli-ssh", "git CLI by hand, plain ssh"
            )
            rows += _rows(
                f"{title}, engine without connection sharing (for comparison)",
                st,
                "engine-ssh-noshare",
                "cli-ssh",
                "git CLI by hand, plain ssh",
                targets=False,
            )
        finally:
            proxy.stop()
            sshd.terminate()
            sshd.wait(5)
    return rows


__all__ = ["DelayProxy", "run"]
