"""Helpers for the service tests: a real sd_notify receiver (an AF_UNIX datagram socket, as
systemd binds for Type=notify), a /metrics scrape, and an MP that runs until released."""

from __future__ import annotations

import os
import select
import socket
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

# A step that runs until the test creates `release` (the step's polling is its own business).
BLOCKING_MP = (
    "# MP-9.1 Waits for the test\n\n```bash\ntouch started\nwhile [ ! -e release ]; do sleep 0.05; done\n```\n\n"
    "```bash\necho done > done.txt\n```\n"
)


def scrape(address: str) -> dict[str, float]:
    """GET http://ADDRESS/metrics and parse the sample lines: {name{labels}: value}."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


class NotifySocket:
    """Binds `address` (a path, or "@name" for the abstract namespace) and collects datagrams."""

    def __init__(self, address: str | None = None):
        if address is None:
            # sun_path holds 108 bytes: pytest's tmp_path can be longer, so use a short dir.
            self._dir = Path(tempfile.mkdtemp(prefix="mpn-", dir="/tmp"))
            address = str(self._dir / "notify.sock")
        else:
            self._dir = None
        self.address = address
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(b"\0" + address[1:].encode() if address.startswith("@") else address)
        self.messages: list[dict[str, str]] = []

    def _recv(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
        if not ready:
            return False
        data = self.sock.recv(65536).decode()
        self.messages.append(dict(line.split("=", 1) for line in data.splitlines() if "=" in line))
        return True

    def drain(self) -> list[dict[str, str]]:
        """Everything already sent; returns the new messages."""
        start = len(self.messages)
        while self._recv(0):
            pass
        return self.messages[start:]

    def wait_for(
        self, predicate: Callable[[dict[str, str]], bool], timeout: float = 20.0, what: str | Callable[[], str] = ""
    ) -> dict[str, str]:
        """Wait on the socket (select with a deadline) for a message that matches."""
        seen = 0
        deadline = time.monotonic() + timeout
        while True:
            for msg in self.messages[seen:]:
                if predicate(msg):
                    return msg
            seen = len(self.messages)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                detail = what() if callable(what) else what
                pytest.fail(f"no matching notify message within {timeout:g} s; got {self.messages}\n{detail}")
            self._recv(remaining)

    def close(self) -> None:
        self.sock.close()
        if self._dir is not None:
            for p in self._dir.iterdir():
                p.unlink()
            os.rmdir(self._dir)
