"""Doctor's look at `mp-engine mcp --http`: a public URL off loopback without a trusted
proxy is a warning; the names it reads are the server's own."""

from __future__ import annotations

import pytest

from mp_engine.commands.doctor.mcp import PUBLIC_URL_ENV, TRUSTED_PROXY_ENV, exposed_without_proxy, option

BASE = ["/venv/bin/mp-engine", "mcp", "--repo", "r", "--http", "127.0.0.1:8765"]


def test_a_public_url_without_a_trusted_proxy_is_named():
    assert exposed_without_proxy([*BASE, "--public-url", "https://mp.example.org"], {}) == "https://mp.example.org"
    assert exposed_without_proxy(BASE, {PUBLIC_URL_ENV: "https://mp.example.org"}) == "https://mp.example.org"
    assert (
        exposed_without_proxy([*BASE, "--public-url=https://mp.example.org", "--trusted-proxy", "127.0.0.1"], {})
        is None
    )
    assert exposed_without_proxy([*BASE, "--public-url", "https://x.org"], {TRUSTED_PROXY_ENV: "127.0.0.1"}) is None
    assert exposed_without_proxy([*BASE, "--public-url", "http://127.0.0.1:8765"], {}) is None  # not public
    assert exposed_without_proxy(BASE, {}) is None
    assert option(["--limit", "a=1", "--limit=b=2"], "--limit") == ["a=1", "b=2"]


def test_the_names_are_the_servers():
    pytest.importorskip("mcp")
    from mp_engine.client.mcp.gate.peer import TRUSTED_PROXY_ENV as SERVERS_PROXY
    from mp_engine.client.mcp.guard import PUBLIC_URL_ENV as SERVERS_URL

    assert (PUBLIC_URL_ENV, TRUSTED_PROXY_ENV) == (SERVERS_URL, SERVERS_PROXY)
