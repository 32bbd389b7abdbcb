"""`mp-engine mcp --http` on this host, behind a public URL: without a `--trusted-proxy`
every client reaches it from the tunnel's address, so the passphrase lockout cannot count
per address (docs/ORCHESTRATORS.md, issue #46). The server's process is read as it runs
(its arguments and environment), so the check needs neither the MCP SDK nor its store."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from mp_engine.commands.doctor.check import OK, WARN, Check
from mp_engine.config.load import Config
from mp_engine.core import pids
from mp_engine.core.workspace import Workspace

# The server's own names (client/mcp/guard.py and gate/peer.py; a unit test holds them equal).
PUBLIC_URL_ENV = "MP_ENGINE_MCP_PUBLIC_URL"
TRUSTED_PROXY_ENV = "MP_ENGINE_MCP_TRUSTED_PROXY"


def option(argv: list[str], name: str) -> list[str]:
    """Every value of `--name VALUE` or `--name=VALUE` in argv."""
    values = []
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            values.append(argv[i + 1])
        elif arg.startswith(name + "="):
            values.append(arg.split("=", 1)[1])
    return values


def exposed_without_proxy(argv: list[str], env: dict[str, str]) -> str | None:
    """The public URL of a server that has one off loopback and no trusted proxy, else None."""
    urls = option(argv, "--public-url") or ([env[PUBLIC_URL_ENV]] if env.get(PUBLIC_URL_ENV) else [])
    if not urls or option(argv, "--trusted-proxy") or env.get(TRUSTED_PROXY_ENV, "").strip():
        return None
    host = urlsplit(urls[-1]).hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    return None if loopback else urls[-1]


def mcp_server(ws: Workspace, config: Config) -> Check:
    servers = [
        s for s in pids.commands_of_user("mcp", "--http") if any("mp-engine" in a or "mp_engine" in a for a in s[1])
    ]
    if not servers:
        return Check("mcp server", OK, "no `mp-engine mcp --http` runs as this user on this host")
    exposed = [(pid, url) for pid, argv, env in servers if (url := exposed_without_proxy(argv, env))]
    if not exposed:
        return Check(
            "mcp server", OK, f"{len(servers)} `mp-engine mcp --http` running; none public without a trusted proxy"
        )
    named = "; ".join(f"pid {pid} serves {url}" for pid, url in exposed[:5])
    return Check(
        "mcp server",
        WARN,
        f"`mp-engine mcp --http` without --trusted-proxy ({named}): every client comes from the tunnel's "
        "address, so wrong passphrases are counted per request, client and server but never per address",
        "if the tunnel sets X-Forwarded-For, restart it with --trusted-proxy 127.0.0.1 (the address the tunnel "
        f"connects from) or {TRUSTED_PROXY_ENV}; see docs/ORCHESTRATORS.md",
    )
