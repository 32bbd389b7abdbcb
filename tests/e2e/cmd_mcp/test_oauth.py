"""End to end (issue #31): ChatGPT's way in. The MCP SDK's own OAuth client
(`OAuthClientProvider`) against `mp-engine mcp --http 127.0.0.1:PORT --public-url
https://mp.test:PORT2`, reached through a loopback tunnel that terminates TLS with a
certificate the client trusts and forwards the public Host; the real daemon on the other
side of a bare remote."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
pytest.importorskip("trustme")
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from tests.e2e.cmd_mcp.serverutil import TOKEN, Browser, McpServer, Memory, cookie_of, form_of, oauth  # noqa: E402
from tests.e2e.cmd_mcp.test_mcp import TOOLS, call, mp, until_done  # noqa: E402
from tests.e2e.cmd_mcp.tunnel import Tunnel  # noqa: E402

pytestmark = pytest.mark.daemon


def events(server: McpServer, name: str) -> list[dict[str, Any]]:
    out = []
    for line in server.log().splitlines():
        if line.startswith("{") and f'"event": "{name}"' in line:
            out.append(json.loads(line))
    return out


async def connect(tunnel: Tunnel, provider: Any) -> Any:
    return Client(streamable_http_client(f"{tunnel.url}/mcp", http_client=tunnel.client(auth=provider)))


TTL = 8  # seconds an access token lives in the first test


def test_the_sdks_oauth_client_registers_consents_and_drives_every_tool(engine, tmp_path):
    bare, url, ws, d = engine
    server = McpServer(tmp_path, url)
    with Tunnel(server.port) as tunnel:
        server.public_port = tunnel.port
        # Long enough that the first tools' calls end before it expires on a loaded machine
        # (an access token expiring mid-session sends the SDK back to consent), then waited out.
        server.extra = ("--access-token-ttl", str(TTL))
        server.start()
        try:
            storage, browser = Memory(), Browser(tunnel)
            provider = oauth(tunnel, browser, storage, "ChatGPT (test)")  # one client, as ChatGPT keeps one

            async def every_tool() -> None:
                async with await connect(tunnel, provider) as client:
                    assert {t.name for t in (await client.list_tools()).tools} == TOOLS
                    sent = await call(client, "send_mp", text=mp("MP-60.1", "echo through the tunnel"))
                    done = await until_done(client, "MP-60.1")
                    assert done["status"] == "COMPLETED", done
                    run_id = done["result"]["run_id"]
                    out = await call(client, "get_run_file", run_id=run_id, path="steps/step-001.stdout")
                    assert out["text"] == "through the tunnel\n"
                    listed = await call(client, "list_results", limit=5)
                    assert listed["results"][0]["mp_sha256"] == sent["sha256"]
                    assert (await call(client, "get_status"))["state"]["status"] == "ONLINE"
                    finished = await call(client, "cancel", mp_id="MP-60.1")
                    assert finished["already"] == "finished" and finished["status"] == "COMPLETED"
                    await call(client, "send_mp", text=mp("MP-60.2", "exit 4"))
                    assert (await until_done(client, "MP-60.2"))["status"] == "ERROR"
                    asked = await client.call_tool("answer", {"mp_id": "MP-60.1", "text": "yes"})
                    assert asked.is_error and "waits for no answer" in asked.structured_content["error"]
                    fixed = await call(client, "approve", mp_id="MP-60.2", text=mp("MP-60.3", "echo fixed"))
                    assert fixed["sent"] is True
                    assert (await until_done(client, "MP-60.3"))["status"] == "COMPLETED"

            async def status() -> None:
                async with await connect(tunnel, provider) as client:
                    assert (await call(client, "get_status"))["state"]["status"] == "ONLINE"

            async def main() -> None:
                await every_tool()
                # Discovery named the public URL; registration and consent happened once.
                assert len(browser.pages) == 1 and "ChatGPT (test)" in browser.pages[0]
                first = storage.tokens
                assert first is not None and first.refresh_token and first.expires_in == TTL
                assert set(first.scope.split()) == {"mp:read", "mp:write"}
                # An expired access token is refreshed, with rotation: the old refresh token ends.
                await anyio.sleep(max(0.0, storage.set_at + TTL + 0.5 - time.monotonic()))
                await status()
                assert storage.tokens.access_token != first.access_token and len(browser.pages) == 1
                # A restart keeps the client and its tokens: no second consent.
                await anyio.to_thread.run_sync(server.restart)
                await status()
                assert len(browser.pages) == 1
                info = storage.client_info
                async with tunnel.client() as http:
                    reused = await http.post(
                        f"{tunnel.url}/token",
                        data={
                            "grant_type": "refresh_token",
                            "refresh_token": first.refresh_token,
                            "client_id": info.client_id,
                            "client_secret": info.client_secret,
                        },
                    )
                assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
                # The rotated token came back: someone else may hold it, so every token of
                # that consent ended (issue #46), and the client asks the owner again.
                await status()
                assert len(browser.pages) == 2

            anyio.run(main)
            info = storage.client_info

            # Nothing stored in the clear: tokens and codes are hashes.
            db = sqlite3.connect(server.store)
            stored = " ".join(str(v) for row in db.execute("SELECT * FROM tokens") for v in row)
            db.close()
            assert storage.tokens.access_token not in stored and storage.tokens.refresh_token not in stored
            assert oct(server.store.stat().st_mode & 0o777) == "0o600"

            # A read-only grant: the owner unticks mp:write; send_mp is refused with the reason.
            reader = Browser(tunnel, write=False)

            async def read_only() -> None:
                async with await connect(tunnel, oauth(tunnel, reader, Memory(), "Reader")) as client:
                    assert (await call(client, "get_status"))["state"]["status"] == "ONLINE"
                    refused = await client.call_tool("send_mp", {"text": mp("MP-60.9", "true")})
                    assert refused.is_error and "lacks the scope mp:write" in refused.structured_content["error"]

            anyio.run(read_only)
            assert any(e.get("status") == 403 and e.get("tool") == "send_mp" for e in events(server, "mcp_refused"))

            # `mcp clients` lists both; `mcp revoke` ends the first and its tokens.
            listed = server.cli("clients", "--json")
            rows = {r["client_name"]: r for r in json.loads(listed.stdout)}
            assert set(rows) == {"ChatGPT (test)", "Reader"} and rows["ChatGPT (test)"]["last_used"]
            revoked = server.cli("revoke", info.client_id)
            assert revoked.returncode == 0, revoked.stderr
            with tunnel.sync_client() as http:
                headers = {"Authorization": f"Bearer {storage.tokens.access_token}"}
                assert http.get(f"{tunnel.url}/api/v1/status", headers=headers).status_code == 401
                # the static token keeps working beside OAuth
                status = http.get(f"{tunnel.url}/api/v1/status", headers={"Authorization": f"Bearer {TOKEN}"})
                assert status.status_code == 200 and status.json()["state"]["status"] == "ONLINE"
            assert server.cli("revoke", info.client_id).returncode == 2
        finally:
            server.stop()
    refusals = events(server, "mcp_refused")
    assert any(e["status"] == 401 and e["client"] == "127.0.0.1" for e in refusals)
    assert "Warning" not in server.log(), server.log()  # no deprecation warnings at start


def test_five_wrong_passphrases_close_the_request_and_an_unknown_host_gets_421(engine, tmp_path):
    bare, url, ws, d = engine
    server = McpServer(tmp_path, url)
    with Tunnel(server.port) as tunnel:
        server.public_port = tunnel.port
        server.start()
        try:
            wrong = Browser(tunnel, passphrase="not the passphrase")

            async def register_and_try() -> list[int]:
                statuses = []
                provider = oauth(tunnel, wrong, Memory(), "Guesser")

                async def guess(authorize_url: str) -> None:
                    async with tunnel.client() as c:
                        consent = (await c.get(authorize_url)).headers["location"]
                        for n in range(6):
                            page = await c.get(consent)
                            if page.status_code != 200:  # the request takes no more: its page says so
                                statuses.append(page.status_code)
                                continue
                            answers = (
                                wrong.answers()
                                if n < 5
                                else {**wrong.answers(), "passphrase": "correct horse battery staple"}
                            )
                            got = await c.post(
                                f"{tunnel.url}/consent",
                                data={**form_of(page.text), **answers},
                                headers={"Cookie": cookie_of(page)},
                            )
                            statuses.append(got.status_code)
                    raise RuntimeError("locked out")

                provider.context.redirect_handler = guess
                with pytest.raises(Exception):  # noqa: B017 - the client's flow ends with our error
                    async with await connect(tunnel, provider) as client:
                        await client.list_tools()
                return statuses

            statuses = anyio.run(register_and_try)
            # four answers say how many tries are left, the fifth closes the request, whose page
            # then says so instead of taking a sixth
            assert statuses == [401, 401, 401, 401, 429, 429], statuses
            with tunnel.sync_client() as http:
                forged = http.get(f"http://127.0.0.1:{server.port}/mcp", headers={"Host": "evil.example"})
                assert forged.status_code == 421
                # Clients probe the protected-resource metadata at the root too (issue #44).
                probed = http.get(f"{tunnel.url}/.well-known/oauth-protected-resource")
                assert probed.status_code == 200 and probed.json()["resource"] == f"{tunnel.url}/mcp"
        finally:
            server.stop()
    refusals = events(server, "mcp_refused")
    assert sum(1 for e in refusals if e["status"] == 429) == 2
    assert any(e["status"] == 421 and e["host"] == "evil.example" and "Invalid Host" in e["reason"] for e in refusals)
    assert len([e for e in events(server, "mcp_consent") if e["outcome"] == "wrong passphrase"]) == 5
    # The refusals say why, and for which client, not the page they answered with (issue #44).
    why = [e["reason"] for e in refusals if e["path"] == "/consent"]
    client = re.fullmatch(r"wrong passphrase for (client \S+ \('Guesser'\))", why[0])
    assert client, why
    wrong = f"wrong passphrase for {client.group(1)}"
    closed = f"passphrases refused (request locked out), for {client.group(1)}"
    assert why == [wrong] * 4 + [f"{wrong}; request locked out", closed]
