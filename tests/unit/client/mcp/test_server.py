"""The HTTP side's discovery documents: the protected-resource metadata where RFC 9728 puts
it for /mcp, and the same document at the root, where clients probe it too (issue #44)."""

from __future__ import annotations

import anyio
import httpx2
import pytest

from mp_engine.client.mcp.guard import resolve
from mp_engine.client.mcp.server import HttpAuth, http_app
from mp_engine.client.orchestrate import Orchestrator

PUBLIC = "https://mp.example.org"


@pytest.mark.parametrize("passphrase", ["the owner's passphrase", None])  # OAuth, or the static token only
def test_the_protected_resource_metadata_is_at_the_suffixed_path_and_at_the_root(tmp_path, passphrase):
    auth = HttpAuth(resolve(PUBLIC, "127.0.0.1", 8765), "a-static-token", passphrase, tmp_path / "s.db")
    app = http_app(Orchestrator(str(tmp_path / "none")), auth)

    async def main():
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=PUBLIC) as c:
            suffixed = await c.get("/.well-known/oauth-protected-resource/mcp")
            root = await c.get("/.well-known/oauth-protected-resource")
            preflight = await c.options(
                "/.well-known/oauth-protected-resource",
                headers={"Origin": "https://chatgpt.com", "Access-Control-Request-Method": "GET"},
            )
            return suffixed, root, preflight

    suffixed, root, preflight = anyio.run(main)
    assert suffixed.status_code == root.status_code == 200, (suffixed.text, root.text)
    assert root.json() == suffixed.json()
    assert root.json()["resource"] == f"{PUBLIC}/mcp" and root.json()["authorization_servers"] == [PUBLIC]
    assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == "*"
