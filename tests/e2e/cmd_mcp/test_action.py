"""End to end (issue #31): the GPT Action path. A Custom GPT calls /api/v1 as /openapi.json
describes it, with the static token as its API key, or with OAuth through a client added by
`mp-engine mcp clients add` (what ChatGPT's Action settings ask for); the real daemon on
the other side of a bare remote."""

from __future__ import annotations

import base64
import hashlib
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

pytest.importorskip("mcp")
pytest.importorskip("openapi_spec_validator")
import httpx2  # noqa: E402
from openapi_spec_validator import validate  # noqa: E402

from tests.conftest import wait_for  # noqa: E402
from tests.e2e.cmd_mcp.serverutil import PASSPHRASE, TOKEN, McpServer, cookie_of, form_of, onward  # noqa: E402
from tests.e2e.cmd_mcp.test_mcp import mp  # noqa: E402

pytestmark = pytest.mark.daemon


def wait_done(http: httpx2.Client, mp_id: str) -> dict:
    got: dict = {}

    def done() -> bool:
        nonlocal got
        r = http.get(f"/api/v1/mps/{mp_id}/result", params={"max_wait_s": 5})
        got = r.json()
        return r.status_code == 200 and got.get("done") is True

    wait_for(done, timeout=90, interval=0.1, what=lambda: f"the result of {mp_id}: {got}")
    return got


def test_each_operation_works_over_http_with_the_bearer_token(engine, tmp_path):
    bare, url, ws, d = engine
    server = McpServer(tmp_path, url).start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        spec = httpx2.get(f"{base}/openapi.json").json()
        validate(spec)
        assert spec["servers"] == [{"url": base}]
        assert httpx2.get(f"{base}/api/v1/status").status_code == 401  # no key, no answer
        with httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
            sent = http.post("/api/v1/mps", json={"text": mp("MP-70.1", "echo from an action")})
            assert sent.status_code == 200 and sent.json()["sent"] is True, sent.text
            again = http.post("/api/v1/mps", json={"text": mp("MP-70.1", "echo from an action")})
            assert again.status_code == 200 and again.json()["already"] in ("waiting", "ran")
            done = wait_done(http, "MP-70.1")
            assert done["status"] == "COMPLETED"
            run_id = done["result"]["run_id"]
            f = http.get(f"/api/v1/runs/{run_id}/file", params={"path": "steps/step-001.stdout"})
            assert f.status_code == 200 and f.json()["text"] == "from an action\n"
            outside = http.get(f"/api/v1/runs/{run_id}/file", params={"path": "../../x"})
            assert outside.status_code == 400 and "not a path inside" in outside.json()["error"]
            results = http.get("/api/v1/results", params={"limit": 0}).json()
            assert results == {"count": 1, "results": []}
            assert http.get("/api/v1/results", params={"limit": 1}).json()["results"][0]["mp_id"] == "MP-70.1"
            assert http.get("/api/v1/status").json()["state"]["status"] == "ONLINE"
            capped = http.get("/api/v1/mps/MP-70.1/result", params={"max_wait_s": 600}).json()
            assert capped["done"] is True and "above the cap" in capped["note"]
            never = http.get("/api/v1/mps/MP-70.9/result", params={"max_wait_s": 1})
            assert never.status_code == 404 and "was sent or seen" in never.json()["error"]
            finished = http.post("/api/v1/mps/MP-70.1/cancel")
            assert finished.status_code == 200 and finished.json()["already"] == "finished"
            assert http.post("/api/v1/mps", json={"text": mp("MP-70.2", "exit 5")}).json()["sent"]
            assert wait_done(http, "MP-70.2")["status"] == "ERROR"
            halted = http.post("/api/v1/mps", json={"text": mp("MP-70.3", "true")})
            assert halted.status_code == 409 and "halted on MP-70.2" in halted.json()["refused"]
            nobody = http.post("/api/v1/mps/MP-70.1/answer", json={"text": "yes"})
            assert nobody.status_code == 400 and "waits for no answer" in nobody.json()["error"]
            fixed = http.post("/api/v1/mps/MP-70.2/approve", json={"text": mp("MP-70.3", "echo fixed")})
            assert fixed.status_code == 200 and fixed.json()["sent"] is True
            assert wait_done(http, "MP-70.3")["status"] == "COMPLETED"
            invalid = http.post("/api/v1/mps", json={"text": "# MP-70.4\n\nprose only\n"})
            assert invalid.status_code == 400 and invalid.json()["valid"] is False
            assert http.post("/api/v1/mps", json={}).status_code == 400  # text is required
    finally:
        server.stop()
    assert '"via": "api"' in server.log() and "from an action" not in server.log()  # MP text not logged


def test_a_custom_gpt_authorizes_with_a_client_added_by_hand(engine, tmp_path):
    bare, url, ws, d = engine
    server = McpServer(tmp_path, url).start()
    base = f"http://127.0.0.1:{server.port}"
    callback = "https://chat.openai.com/aip/g-test/oauth/callback"
    try:
        added = server.cli("clients", "add", "--name", "My Custom GPT", "--redirect-uri", callback)
        assert added.returncode == 0, added.stderr
        creds = dict(line.split(":", 1) for line in added.stdout.splitlines() if line.startswith("client_"))
        client_id, secret = creds["client_id"].strip(), creds["client_secret"].strip()
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": callback,
            "state": "xyz",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "scope": "mp:read mp:write",
        }
        with httpx2.Client(base_url=base, timeout=60) as browser:
            consent = browser.get(f"/authorize?{urlencode(query)}").headers["location"]
            page = browser.get(consent)
            assert "My Custom GPT" in page.text
            back = browser.post(
                "/consent",
                data={**form_of(page.text), "passphrase": PASSPHRASE, "decision": "allow", "scope_write": "1"},
                headers={"Cookie": cookie_of(page)},
            )
        assert onward(back).startswith(callback)
        code = parse_qs(urlsplit(onward(back)).query)["code"][0]
        token = httpx2.post(
            f"{base}/token",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": callback,
                "code_verifier": verifier,
                "client_id": client_id,
                "client_secret": secret,
            },
        ).json()
        assert token["token_type"] == "Bearer" and token["expires_in"] == 3600 and token["refresh_token"]
        status = httpx2.get(f"{base}/api/v1/status", headers={"Authorization": f"Bearer {token['access_token']}"})
        assert status.status_code == 200 and status.json()["state"]["status"] == "ONLINE"
        listed = server.cli("clients")
        assert client_id in listed.stdout and "My Custom GPT" in listed.stdout
        # RFC 7009 revocation at /revoke ends the pair: the access token and its refresh token.
        gone = httpx2.post(
            f"{base}/revoke",
            data={"token": token["access_token"], "client_id": client_id, "client_secret": secret},
        )
        assert gone.status_code == 200
        bearer = {"Authorization": f"Bearer {token['access_token']}"}
        assert httpx2.get(f"{base}/api/v1/status", headers=bearer).status_code == 401
        refresh = {"grant_type": "refresh_token", "refresh_token": token["refresh_token"]}
        again = httpx2.post(f"{base}/token", data={**refresh, "client_id": client_id, "client_secret": secret})
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    finally:
        server.stop()
