"""The dashboard's app through Starlette's test client: the token (header, link, a cookie
derived from it), the Host check, escaping of what came from an MP, the API's errors, the
security headers on every answer, and the event stream. (Streams sharing one watcher and
their caps: tests/unit/web/test_live.py, and the real server in tests/e2e/test_dashboard.py.)"""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from mp_engine.config import load_config
from mp_engine.web.app import COOKIE, Dashboard, session_of
from mp_engine.web.documents import Documents
from tests.conftest import drop

HOSTILE = '# MP-7.1 <img src=x onerror="window.pwned=1"> & <b>bold</b>\n\n```bash\ntrue\n```\n'


def app_for(ws, **opts) -> tuple[Dashboard, TestClient]:
    d = Dashboard(Documents(ws, load_config(ws.root).model_dump(mode="json")), **opts)
    return d, TestClient(d.app, base_url="http://127.0.0.1")


def test_a_token_is_required_by_header_link_or_cookie(ws):
    refused = []
    d, client = app_for(ws, token="s3cret-token", on_refused=lambda **kw: refused.append(kw))
    r = client.get("/api/v1/state")
    assert r.status_code == 401 and "Bearer" in r.headers["www-authenticate"]
    assert refused == [{"path": "/api/v1/state", "client": "testclient", "reason": "no valid token"}]
    assert client.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/api/v1/state", headers={"Authorization": "Bearer s3cret-token"}).json()["state"]
    r = client.get("/history?token=s3cret-token", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "http://127.0.0.1/history"  # the token leaves the URL
    assert "httponly" in r.headers["set-cookie"].lower() and "samesite=strict" in r.headers["set-cookie"].lower()
    # the cookie holds a value derived from the token, never the token (issue #46)
    assert "s3cret-token" not in r.headers["set-cookie"] and session_of("s3cret-token") in r.headers["set-cookie"]
    assert client.get("/history").status_code == 200
    _, fresh = app_for(ws, token="s3cret-token")
    fresh.cookies.set(COOKIE, "s3cret-token")
    assert fresh.get("/history").status_code == 401
    fresh.cookies.set(COOKIE, session_of("s3cret-token"))
    assert fresh.get("/history").status_code == 200


def test_only_loopback_names_or_the_configured_host_are_served(ws):
    _, client = app_for(ws)
    assert client.get("/", headers={"host": "attacker.example"}).status_code == 400  # DNS rebinding
    assert client.get("/", headers={"host": "localhost:8470"}).status_code == 200
    _, client = app_for(ws, hosts=("mp.example.org",), token="t")
    assert client.get("/", headers={"host": "mp.example.org", "authorization": "Bearer t"}).status_code == 200


def test_html_from_an_mp_is_shown_as_text(ws):
    drop(ws, HOSTILE)
    _, client = app_for(ws)
    page = client.get("/").text
    assert "<img src=x" not in page and "<b>bold</b>" not in page
    assert "&lt;img src=x onerror=&#34;window.pwned=1&#34;&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in page
    assert client.get("/api/v1/state").json()["pending"]["title"].startswith("<img")


def test_api_errors_say_what_to_do(ws):
    _, client = app_for(ws)
    r = client.get("/api/v1/runs?limit=0")
    assert r.status_code == 400 and r.json()["fix"] == "?limit=50"
    assert client.get("/api/v1/runs/nope").status_code == 404
    assert client.get("/runs/nope").status_code == 404
    assert client.get("/api/v1/runs?limit=3").json()["runs"] == []


def test_the_stream_sends_the_pages_live_parts_when_the_workspace_changes(ws):
    d, client = app_for(ws, tick=0.01)
    with client.stream("GET", "/api/v1/stream") as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = r.iter_lines()
        assert next(lines) == "event: fragments"
        parts = json.loads(next(lines).removeprefix("data: "))
        assert set(parts) == {"state", "queue", "running"} and "nothing waiting" in parts["queue"]
        drop(ws, HOSTILE)  # the slot changed: the queue part is sent again
        while next(lines) != "event: fragments":
            pass
        parts = json.loads(next(lines).removeprefix("data: "))
        assert "MP-7.1" in parts["queue"] and "&lt;img" in parts["queue"]
        d.stop.set()


@pytest.mark.parametrize("path", ["/", "/history", "/static/dashboard.js"])
def test_the_pages_and_assets_are_served(ws, path):
    _, client = app_for(ws)
    r = client.get(path)
    assert r.status_code == 200 and r.text


@pytest.mark.parametrize("path", ["/", "/history", "/static/dashboard.js", "/api/v1/state", "/runs/nope"])
def test_every_answer_forbids_framing_inline_script_referrers_and_sniffing(ws, path):
    _, client = app_for(ws, token="t")
    for r in (client.get(path, headers={"Authorization": "Bearer t"}), client.get(path)):  # refused ones too
        policy = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy and "'unsafe-inline'" not in policy
        assert r.headers["referrer-policy"] == "no-referrer" and r.headers["x-content-type-options"] == "nosniff"
