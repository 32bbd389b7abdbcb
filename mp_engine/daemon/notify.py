"""sd_notify(3) in a few lines: READY, STATUS, WATCHDOG and STOPPING to systemd.

Written here rather than taken from a library because the libraries swallow errors
(systemd/python-systemd's `notify` returns False, `sdnotify` ignores every OSError): a
daemon that cannot reach its supervisor must say so in its log. The protocol is one
datagram of `KEY=VALUE` lines to the AF_UNIX socket named by `NOTIFY_SOCKET`; a name
that starts with `@` is in the abstract namespace (a leading NUL byte).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

import structlog

log = structlog.get_logger("mp_engine.daemon.notify")


class Notifier:
    """Sends notifications to `NOTIFY_SOCKET`; every method is a no-op when it is unset."""

    def __init__(self, address: str | None):
        self.address = address or None
        self._sock: socket.socket | None = None
        self._failed = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Notifier:
        environ = os.environ if environ is None else environ
        return cls(environ.get("NOTIFY_SOCKET"))

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def _target(self) -> str | bytes:
        assert self.address is not None
        if self.address.startswith("@"):
            return b"\0" + self.address[1:].encode()
        return self.address

    def send(self, **fields: str | int) -> bool:
        """Send `KEY=VALUE` lines (`send(READY=1, STATUS="idle")`); False if it failed."""
        if self.address is None:
            return False
        # STATUS is one line: a newline would start a new (bogus) assignment.
        payload = "\n".join(f"{k}={str(v).replace(chr(10), ' ')}" for k, v in fields.items()).encode()
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.sendto(payload, self._target())
        except OSError as e:
            # Logged every time until it works again, then once more when it recovers:
            # a silent failure here would let systemd kill a healthy engine unexplained.
            log.error("sd_notify failed", socket=self.address, error=str(e), message=payload.decode()[:200])
            self._failed = True
            return False
        if self._failed:
            log.info("sd_notify works again", socket=self.address)
            self._failed = False
        return True

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def watchdog_interval(environ: Mapping[str, str] | None = None) -> float | None:
    """Seconds between WATCHDOG=1 pings (half of `WATCHDOG_USEC`), or None when off.

    `WATCHDOG_PID`, when set, must be this process (sd_watchdog_enabled(3)): a child that
    inherited the variables must not ping for its parent.
    """
    environ = os.environ if environ is None else environ
    raw = environ.get("WATCHDOG_USEC", "")
    pid = environ.get("WATCHDOG_PID", "")
    if not raw.isdigit() or int(raw) == 0:
        return None
    if pid and pid != str(os.getpid()):
        return None
    return int(raw) / 1e6 / 2
