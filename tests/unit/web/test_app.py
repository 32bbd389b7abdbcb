"""The dashboard's app through Starlette's test client: the token (header, link, a cookie
derived from it), the Host check, escaping of what came from an MP, the API's errors, the
security headers on every answer, and the event stream. (Streams sharing one watcher and
their caps: tests/unit/web/test_live.py, and the real server in tests/e2e/test_dashboard.py.)"""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from mp_engine.config.load import load_config
from mp_engine.web.app import COOKIE, Dashboard, session_of, templates
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


def run_mps(ws, monkeypatch, *texts: str) -> None:
    from mp_engine.pipeline.engine import Engine

    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    engine = Engine(ws, load_config(ws.root))
    engine.start(daemon=False)
    for text in texts:
        drop(ws, text)
        engine.tick()
    engine.shutdown()


FAILS = "# MP-7.5 Fails\n\n```bash\necho 'about to fail' >&2\nexit 3\n```\n\n```bash\necho never\n```\n"


def test_a_run_page_shows_code_as_code_and_a_step_that_never_ran_as_such(ws, monkeypatch):
    # issue #44: "(exit None, -)" with an empty section, and backticks shown literally.
    run_mps(ws, monkeypatch, FAILS)
    _, client = app_for(ws)
    (run,) = client.get("/api/v1/runs").json()["runs"]
    page = client.get(f"/runs/{run['run_id']}").text
    assert "exit None" not in page and '<span class="st">not run</span>: <code>bash: echo never</code>' in page
    assert "Fix: Correct <code>exit 3</code> (line 2 of step 1)" in page and "`" not in page.split("<main>")[1]
    index = client.get("/").text
    assert (
        "<code>exit 3</code> (line 2 of step 1) exited with code 3" in index
        and "<code>Approves: MP-7.5</code>" in index
    )


def test_history_gives_a_refused_mp_its_reason_and_colours_the_status_cell(ws, monkeypatch):
    # issue #44: a rejected MP was `UNPARSED` with no title; completed rows coloured the title.
    run_mps(ws, monkeypatch, "MP 7.6 no header\n", "# MP-7.7 Fine\nApproves: MP-7.5\n\n```bash\ntrue\n```\n")
    _, client = app_for(ws)
    page = client.get("/history").text
    assert "not an <code># MP-&lt;major&gt;.&lt;minor&gt;</code> header" in page
    assert '<td class="st">REFUSED</td>' in page and '<td class="st">COMPLETED</td>' in page
    assert 'class="tick"' in page and 'class="axis"' in page


def test_the_live_view_counts_checks_apart_from_steps():
    doc = {
        "state": {"current": "MP-7.8"},
        "running": {"run_id": "r", "mp_id": "MP-7.8", "steps": [], "elapsed": 1.0},
        "step": {"id": "check-001", "number": 4, "of": 4, "label": "check 1/1", "output_tail": []},
    }
    part = templates().get_template("_running.html").render(doc=doc)
    assert "check 1/1 (check-001)" in part and "step 4/4" not in part


def test_the_page_names_its_icon(ws):
    _, client = app_for(ws)
    assert '<link rel="icon" href="/static/favicon.svg"' in client.get("/").text
    icon = client.get("/static/favicon.svg")
    assert icon.status_code == 200 and icon.text.startswith("<svg")


@pytest.mark.parametrize("path", ["/", "/history", "/static/dashboard.js", "/api/v1/state", "/runs/nope"])
def test_every_answer_forbids_framing_inline_script_referrers_and_sniffing(ws, path):
    _, client = app_for(ws, token="t")
    for r in (client.get(path, headers={"Authorization": "Bearer t"}), client.get(path)):  # refused ones too
        policy = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy and "'unsafe-inline'" not in policy
        assert r.headers["referrer-policy"] == "no-referrer" and r.headers["x-content-type-options"] == "nosniff"


def test_the_page_and_the_state_show_the_budgets_spent(ws):
    """Issue #42: spend today and this month against `[agent] daily_cost_usd` and
    `monthly_cost_usd`, every MP's and every fleet worker's calls together."""
    from mp_engine.record.spend import SPEND_FILE, SpendLog

    text = ws.config_file.read_text()
    ws.config_file.write_text(text.replace("[agent]\n", "[agent]\ndaily_cost_usd = 1.0\nmonthly_cost_usd = 20.0\n", 1))
    SpendLog(ws.local_dir / SPEND_FILE).charge("run/k", 1.25, mp="MP-1")
    _, client = app_for(ws)
    budget = client.get("/api/v1/state").json()["budget"]
    assert budget["day"]["spent_usd"] == 1.25 and budget["day"]["left_usd"] == 0.0
    page = client.get("/").text
    assert '<span class="bad">$1.2500 of $1.0 today</span>' in page and "$1.2500 of $20.0 this month" in page
    assert 'aria-label="agent spend per day this month"' in page and 'class="limit"' in page  # the plot
    assert budget["days"] == [{"day": budget["day"]["key"], "usd": 1.25}]


def test_a_pull_request_is_linked_with_its_ci_state_while_ci_runs_and_after(ws, tmp_path, monkeypatch):
    from tests.unit.agent.run.repos import BRANCH, MP, engine, git, until_done

    eng, forge, bare = engine(ws, tmp_path, monkeypatch, review_poll=3600)
    drop(ws, MP)
    res = eng.tick()
    while res.action != "waiting" or not git(bare, "branch", "--list", BRANCH):
        res = eng.tick()
    _, client = app_for(ws)
    page = client.get("/").text
    link = '<a class="pr-link" href="https://github.com/me/app/pull/1">#1</a>'
    assert link in page and "waiting for CI" in page and "CI rounds 0 of 2" in page
    assert client.get("/api/v1/state").json()["agent"]["pull_request"]["number"] == 1
    assert until_done(eng, forge, bare).action == "completed"
    page = client.get("/").text
    assert link in page and '<b class="pr-ci">passed</b>' in page and "review rounds 0 of 3" in page, page
    assert 'id="for-review"' in page  # waiting for review now
    run = client.get("/api/v1/state").json()["last_mp"]["run_id"]
    assert link in client.get(f"/runs/{run}").text
