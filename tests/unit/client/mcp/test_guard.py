"""The public URL and the Host values it implies, and the event for a refused request."""

from __future__ import annotations

import anyio
import httpx2
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from mp_engine.client.mcp.guard import Guard, host_allowed, resolve


def test_the_public_url_names_the_hosts_answered():
    public = resolve("https://mp.example.org/", "127.0.0.1", 8765)
    assert public.url == "https://mp.example.org"
    assert {"mp.example.org", "mp.example.org:443", "127.0.0.1:8765", "localhost:8765"} <= set(public.hosts)
    assert "https://mp.example.org" in public.origins
    on_port = resolve("https://mp.test:9443", "127.0.0.1", 8765)
    assert "mp.test:9443" in on_port.hosts and "mp.test" not in on_port.hosts
    local = resolve(None, "127.0.0.1", 8765, ("box.lan",))
    assert local.url == "http://127.0.0.1:8765"
    assert host_allowed("box.lan:8765", local.hosts) and host_allowed("box.lan", local.hosts)
    assert not host_allowed("evil.example", local.hosts) and not host_allowed(None, local.hosts)
    assert not host_allowed("127.0.0.1:9999", local.hosts)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://mp.example.org", r"not an http\(s\) URL"),
        ("https://mp.example.org/mcp", "has a path"),
        ("http://mp.example.org", "plain http"),
    ],
)
def test_a_public_url_that_cannot_work_is_refused_with_the_reason(url, says):
    with pytest.raises(ValueError, match=says):
        resolve(url, "127.0.0.1", 8765)


def test_every_refused_request_is_an_event_with_its_reason_and_address(capsys):
    from mp_engine.record import logs

    logs.configure("info")

    async def secret(request):
        return PlainTextResponse(
            "no", 401, headers={"WWW-Authenticate": 'Bearer error_description="Authentication required"'}
        )

    async def ok(request):
        return PlainTextResponse("fine")

    app = Guard(Starlette(routes=[Route("/mcp", secret), Route("/ok", ok)]), resolve(None, "127.0.0.1", 8765))

    async def main():
        transport = httpx2.ASGITransport(app=app, client=("10.1.2.3", 5555))
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
            assert (await c.get("/ok")).status_code == 200
            assert (await c.get("/mcp")).status_code == 401
            assert (await c.get("/ok", headers={"Host": "evil.example"})).status_code == 421

    anyio.run(main)
    err = capsys.readouterr().err
    assert '"status": 401' in err and "Authentication required" in err and "10.1.2.3" in err
    assert '"status": 421' in err and "evil.example" in err
    assert err.count("mcp_refused") == 2  # not the request that passed
