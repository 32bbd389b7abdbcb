"""The dashboard served by the real daemon (`[dashboard] listen`, issue #32): its JSON API
against the schema docs/PROTOCOL.md §9 gives, before, during and after an MP; its token
kept as a derived session cookie, security headers on every answer, and capped event
streams (issue #46); and a real browser (Debian's headless Chromium, driven by Selenium
through Debian's chromedriver) watching a planned agent MP's tasks move from pending to
running to done without a reload, under the dashboard's Content-Security-Policy, a halt
showing its fix, and an MP title with HTML in it shown as text. Screenshots are saved
under the test's tmp_path (`screenshots/`)."""

from __future__ import annotations

import http.client
import json
import socket
import urllib.request
from typing import Any

import pytest

from tests.agentutil import configure, level, planner, task
from tests.conftest import drop, events, read_state, wait_for
from tests.e2e.chromium import chromium, console

pytestmark = pytest.mark.daemon

ENV = {"MP_ENGINE_DASHBOARD__LISTEN": "127.0.0.1:0", "MP_ENGINE_ENGINE__SETTLE_SECONDS": "0"}

# docs/PROTOCOL.md §9: the keys each document always has, and their types.
STATE_KEYS = {
    "schema": str,
    "generated_at": str,
    "root": str,
    "state": dict,
    "summary": str,
    "daemon": dict,
    "queue": list,
    "heartbeat": dict,
    "actions": list,
}
STATE_STATE_KEYS = {"status": str, "current": str, "last_updated": str}
RUNNING_KEYS = {"run_id": str, "mp_id": str, "started_at": str}
RUNS_KEYS = {"schema": str, "generated_at": str, "runs": list, "stats": dict}
RUN_ENTRY_KEYS = {"run_id": str, "mp_id": str, "title": str, "status": str}
RUN_KEYS = {"schema": str, "run_id": str, "finished": bool, "ledger": dict}


def conforms(doc: dict[str, Any], keys: dict[str, type], what: str) -> None:
    for k, t in keys.items():
        assert k in doc, f"{what}: no {k!r} in {sorted(doc)}"
        assert isinstance(doc[k], t), f"{what}: {k!r} is {type(doc[k]).__name__}, not {t.__name__}"


def get(base: str, path: str) -> Any:
    with urllib.request.urlopen(base + path, timeout=10) as r:
        assert r.headers["content-type"].startswith("application/json")
        return json.loads(r.read())


def serve(ws, daemon_factory, env: dict[str, str] | None = None):
    d = daemon_factory(ws.root, env={**ENV, **(env or {})}).start()
    wait_for(lambda: events(ws, "dashboard_listening"), what=lambda: "dashboard_listening\n" + d.output())
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what=lambda: "ONLINE\n" + d.output())
    assert "mp-engine: dashboard at http://127.0.0.1:" in d.output()
    return d, "http://" + events(ws, "dashboard_listening")[-1]["address"]


SLOW = "# MP-8.1 Slow steps\n\n```bash\necho first-line; sleep 1.5; echo second-line\n```\n\n```bash\nsleep 0.2\n```\n"


def test_the_api_before_during_and_after_an_mp(ws, daemon_factory):
    d, base = serve(ws, daemon_factory)
    try:
        before = get(base, "/api/v1/state")
        conforms(before, STATE_KEYS, "state")
        conforms(before["state"], STATE_STATE_KEYS, "state.state")
        assert before["state"]["status"] == "ONLINE" and "running" not in before and before["daemon"]["alive"]
        assert get(base, "/api/v1/runs")["runs"] == []
        drop(ws, SLOW)
        during = wait_for(lambda: (s := get(base, "/api/v1/state")).get("running") and s, what="a running MP")
        conforms(during["running"], RUNNING_KEYS, "state.running")
        assert during["state"]["status"] == "RUNNING" and during["running"]["mp_id"] == "MP-8.1"
        assert any(a["command"].startswith("mp-engine cancel") for a in during["actions"])
        tail = wait_for(
            lambda: "first-line" in " ".join(get(base, "/api/v1/state").get("step", {}).get("output_tail", [])),
            what="the live tail of step 1",
        )
        assert tail
        wait_for(lambda: read_state(ws)["status"] == "ONLINE" and read_state(ws)["last_result"], what="the result")
        after = get(base, "/api/v1/runs?limit=5")
        conforms(after, RUNS_KEYS, "runs")
        conforms(after["runs"][0], RUN_ENTRY_KEYS, "runs[0]")
        assert after["runs"][0]["status"] == "COMPLETED" and after["stats"]["outcomes"] == {"COMPLETED": 1}
        run = get(base, f"/api/v1/runs/{after['runs'][0]['run_id']}")
        conforms(run, RUN_KEYS, "run")
        assert run["finished"] and run["result"]["status"] == "COMPLETED"
        assert [s["exit_code"] for s in run["result"]["steps"]] == [0, 0]
        assert "second-line" in run["result"]["steps"][0]["stdout_tail"]
    finally:
        d.signal(15)
        d.wait()


TOKEN = "dashboard-token-0123456789"


def answer(base: str, path: str, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", path, headers=headers or {})
    got = conn.getresponse()
    got.read()
    conn.close()
    return got


def stream_from(base: str, source: str) -> tuple[socket.socket, int]:
    """An event stream opened from the loopback address `source`: the socket, kept open,
    and the status it was answered with."""
    host, port = base.removeprefix("http://").split(":")
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(10)
    s.connect((host, int(port)))
    s.sendall(f"GET /api/v1/stream HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode())
    head = b""
    while b"\r\n" not in head:
        head += s.recv(1)
    return s, int(head.split()[1])


def test_the_token_becomes_a_session_every_answer_is_guarded_and_streams_are_capped(ws, daemon_factory):
    env = {
        "MP_ENGINE_DASHBOARD_TOKEN": TOKEN,
        "MP_ENGINE_DASHBOARD__MAX_STREAMS": "3",
        "MP_ENGINE_DASHBOARD__MAX_STREAMS_PER_CLIENT": "2",
    }
    d, base = serve(ws, daemon_factory, env)
    opened: list[socket.socket] = []
    try:
        link = answer(base, f"/?token={TOKEN}")
        cookie = link.headers["set-cookie"]
        assert link.status == 303 and cookie.startswith("mp_dashboard_session=") and TOKEN not in cookie
        session = cookie.split(";", 1)[0]
        assert answer(base, "/", {"Cookie": session}).status == 200
        assert answer(base, "/", {"Cookie": f"mp_dashboard_session={TOKEN}"}).status == 401
        for path, headers in (
            ("/", {"Cookie": session}),
            ("/api/v1/state", {"Cookie": session}),
            ("/static/dashboard.js", {"Cookie": session}),
            ("/", {}),
        ):
            got = answer(base, path, headers)
            policy = got.headers["content-security-policy"]
            assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy, (path, policy)
            assert (
                got.headers["referrer-policy"] == "no-referrer" and got.headers["x-content-type-options"] == "nosniff"
            )
        # Two streams per client, three in all; before issue #46 there was no cap at all.
        statuses = []
        for source in ("127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.3"):
            s, status = stream_from(base, source)
            opened.append(s)
            statuses.append(status)
        assert statuses == [200, 200, 429, 200, 429]
        opened.pop(0).close()  # a tab closed: its place is free again

        def reopened() -> bool:
            s, status = stream_from(base, "127.0.0.3")
            opened.append(s)
            return status == 200

        wait_for(reopened, timeout=20, interval=0.2, what="a stream's place freed by a closed one")
    finally:
        for s in opened:
            s.close()
        d.signal(15)
        d.wait()
    refused = events(ws, "dashboard_refused")
    assert any(e.get("reason") == "too many event streams open" for e in refused), refused


# -- the browser ---------------------------------------------------------------------------

PLANNED_HTML = """# MP-9.7 <img src=x onerror="window.pwned=1"> three <b>files</b>
Executor: agent
Plan: auto

Write the three files the checks ask for.

## Validate

```bash
grep -qx a out/a.txt
```

```bash
grep -qx b out/b.txt
```

```bash
grep -qx c out/c.txt
```
"""


def statuses(driver) -> dict[str, str]:
    """Each task row's status, read in one script (the live parts are replaced under us)."""
    rows = "#running tr[data-mt]"
    return dict(
        driver.execute_script(
            f"return Array.from(document.querySelectorAll('{rows}')).map(r => [r.dataset.mt, r.dataset.status])"
        )
    )


def text_of(driver, selector: str) -> str:
    return driver.execute_script(f"const e = document.querySelector('{selector}'); return e ? e.innerText : ''")


def test_a_browser_watches_tasks_move_sees_a_halt_and_its_fix_and_html_as_text(ws, tmp_path, daemon_factory):
    shots = tmp_path / "screenshots"
    shots.mkdir()
    plan = {
        "tasks": [
            task("a", ("a", "out/a.txt")),
            task("b", ("b", "out/b.txt"), checks=("check-002",)),
            task("c", ("c", "out/c.txt"), checks=("check-003",), after=("a", "b")),
        ]
    }
    configure(
        ws, [level("worker", "good.py", "--sleep", "1.5")], max_parallel=2, planner=planner(tmp_path / "plans", plan)
    )
    d, base = serve(ws, daemon_factory)
    driver = chromium(shots.parent / "chromium-profile")
    try:
        driver.get(base + "/")
        wait_for(lambda: "● live" in text_of(driver, "#live"), what="the event stream")
        loaded = driver.execute_script("return window.mpDashboard.loadedAt")
        drop(ws, PLANNED_HTML)
        seen: dict[str, list[str]] = {}

        def watch() -> bool:
            for mt, st in statuses(driver).items():
                if not seen.get(mt) or seen[mt][-1] != st:
                    seen.setdefault(mt, []).append(st)
                    driver.save_screenshot(str(shots / f"{len(list(shots.iterdir())):02d}-{mt}-{st}.png"))
            return len(seen) == 3 and all(went[-1] == "completed" for went in seen.values())

        wait_for(watch, timeout=60, interval=0.1, what=lambda: f"every task done; seen {seen}\n{d.output()[-3000:]}")
        assert read_state(ws)["last_result"]["status"] == "COMPLETED"
        # Every task was seen running and then done, in the page loaded once (no reload).
        assert set(seen) == {"MT-001", "MT-002", "MT-003"}, seen
        for mt, went in seen.items():
            assert "running" in went and "completed" in went[went.index("running") :], (mt, went)
        assert seen["MT-003"][0] == "pending"  # it needed the other two
        assert driver.execute_script("return window.mpDashboard.loadedAt") == loaded
        assert int(driver.execute_script("return window.mpDashboard.updates")) >= 3
        assert driver.execute_script("return window.pwned") is None and not driver.find_elements(
            "css selector", "main img"
        )
        assert "Content Security Policy" not in console(driver)  # the page keeps to its own policy

        # A halt: its fix appears, and the MP's title (HTML) is shown as text.
        drop(ws, '# MP-9.8 <b>bold</b> fails\n\n```bash\necho "no such thing" >&2; exit 3\n```\n')
        halt = wait_for(lambda: text_of(driver, "#halt"), timeout=30, what="the halt on the page")
        driver.save_screenshot(str(shots / "halt.png"))
        assert "Halted on MP-9.8: <b>bold</b> fails" in halt and "Fix:" in halt
        assert "mp-engine approve" in text_of(driver, ".actions")
        assert driver.execute_script("return window.mpDashboard.loadedAt") == loaded
        # Its diagnosis quotes code as code; the page asked for no icon it lacks (issue #44).
        assert driver.find_elements("css selector", "#halt code")
        said = console(driver)
        assert "favicon" not in said and "404" not in said, said
        # The history page, and the planned run's page with its graph.
        driver.get(base + "/history")
        assert "MP-9.7" in driver.page_source and driver.find_elements("css selector", "svg.plot rect")
        assert len(driver.find_elements("css selector", "svg.plot text.tick")) >= 4  # the axes are labelled
        assert all(r.size["height"] >= 3 for r in driver.find_elements("css selector", "svg.durations rect"))
        driver.find_element("link text", "MP-9.7").click()
        assert len(driver.find_elements("css selector", "svg.graph g.node")) == 3
        assert len(driver.find_elements("css selector", "svg.graph line")) == 2
        assert '<img src=x onerror="window.pwned=1"> three <b>files</b>' in driver.find_element("tag name", "h1").text
        driver.save_screenshot(str(shots / "run.png"))
        assert len(list(shots.glob("*.png"))) >= 8
    finally:
        driver.quit()
        d.signal(15)
        d.wait()


def test_a_browser_sees_the_plan_that_waits_for_approval_as_a_graph(ws, tmp_path, daemon_factory):
    """issue #42: `Plan: review` halts on the plan; the halt shows its task graph and how to
    answer; `approve` (here from the host) starts the same run, and the page follows."""
    from mp_engine.inbox import answer
    from tests.agentutil import PLANNED

    plan = {
        "tasks": [
            task("a", ("hello", "out/a.txt")),
            task("b", ("bye", "out/b.txt"), checks=("check-002",), after=("a",)),
        ]
    }
    configure(ws, [level("worker", "good.py")], planner=planner(tmp_path / "plans", plan))
    d, base = serve(ws, daemon_factory)
    driver = chromium(tmp_path / "chromium-profile")
    try:
        driver.get(base + "/")
        wait_for(lambda: "● live" in text_of(driver, "#live"), what="the event stream")
        drop(ws, PLANNED.replace("Plan: auto", "Plan: review"))
        shown = wait_for(lambda: text_of(driver, "#plan-review"), timeout=30, what=lambda: "the plan\n" + d.output())
        assert "The plan waits for your approval" in shown and "approve" in shown
        nodes = driver.find_elements("css selector", "#plan-review svg.graph g.node")
        assert [n.get_attribute("data-mt") for n in nodes] == ["MT-001", "MT-002"]
        assert len(driver.find_elements("css selector", "#plan-review svg.graph line")) == 1
        driver.save_screenshot(str(tmp_path / "plan-review.png"))
        answer.write_host(ws, "MP-4.1", "approve")
        wait_for(lambda: not driver.find_elements("css selector", "#plan-review"), timeout=60, what="the halt lifted")
        wait_for(lambda: read_state(ws)["last_result"]["status"] == "COMPLETED", timeout=60, what=d.output)
    finally:
        driver.quit()
        d.signal(15)
        d.wait()


def test_a_browser_sees_the_pull_request_s_link_and_ci_state_live(ws, tmp_path, daemon_factory, forge):
    """An MP on another repository (issue #41): while the run waits for CI the page links the
    pull request and says CI is awaited; once CI is green it says so and lists it for review."""
    from tests.forge.scene import MP, Ci, setup

    token, double, served, bare = forge
    env, _ = setup(ws, tmp_path, forge)
    d, base = serve(ws, daemon_factory, env)
    driver = chromium(tmp_path / "chromium-profile")
    ci = None
    try:
        driver.get(base + "/")
        wait_for(lambda: "● live" in text_of(driver, "#live"), what="the event stream")
        drop(ws, MP)
        wait_for(lambda: "waiting for CI" in text_of(driver, "#pull-request"), timeout=60, what=d.output)
        link = driver.find_element("css selector", "#pull-request a.pr-link")
        assert link.get_attribute("href") == "https://github.com/me/app/pull/1" and link.text == "#1"
        driver.save_screenshot(str(tmp_path / "pull-request-waiting.png"))
        ci = Ci(double, bare, green=True)
        wait_for(lambda: "CI: passed" in text_of(driver, "#pull-request"), timeout=60, what=d.output)
        assert "#1" in text_of(driver, "#for-review") and "review rounds 0 of 3" in text_of(driver, "#for-review")
        driver.save_screenshot(str(tmp_path / "pull-request-green.png"))
        assert "Content Security Policy" not in console(driver)
    finally:
        if ci is not None:
            ci.close()
        driver.quit()
        d.signal(15)
        d.wait()
