"""The base of every section: unknown keys are errors, values are frozen."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (the metrics endpoint, `mp-engine mcp --http`)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def listen_address(listen: str) -> tuple[str, int]:
    """`"host:port"` (`[::1]:8470` for IPv6) as (host, port); ValueError naming the value
    when it is not one (`[metrics]` and `[dashboard]` listen)."""
    host, sep, port = listen.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"listen must be HOST:PORT, got {listen!r}")
    return host, int(port)
