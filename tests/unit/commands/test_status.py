"""`mp-engine status` for a person and as JSON, `history`, and the one-line STATUS= text."""

from __future__ import annotations

import json
import math
import os
import signal
from datetime import UTC, datetime, timedelta

import pytest

from mp_engine.agent.progress import Progress
from mp_engine.cli.main import main
from mp_engine.commands.status import render_status
from mp_engine.config.load import load_config
from mp_engine.daemon.health import ago, status_line
from mp_engine.record.archive import create_run
from mp_engine.record.state import SessionState
from mp_engine.views.status import status_report
from tests.conftest import drop, read_state, wait_for
from tests.gitutil import engine_workspace, make_remote
from tests.serviceutil import BLOCKING_MP, scrape


def run_main(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(list(argv))
    return rc, capsys.readouterr().out


@pytest.fixture
def two_mps(ws, capsys, monkeypatch):
    """MP-7.1 completed, then MP-7.2 failed: the engine is halted."""
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    drop(ws, "# MP-7.1 Say hello\n\n```bash\necho hello\n```\n")
    assert run_main(capsys, "once", "--root", str(ws.root))[0] == 0
    drop(ws, "# MP-7.2 Break on purpose\n\n```bash\necho oops >&2\nexit 3\n```\n")
    assert run_main(capsys, "once", "--root", str(ws.root))[0] == 1
    return ws


def test_status_json_has_the_last_mp_the_halt_and_the_last_error(two_mps, capsys):
    ws = two_mps
    rc, out = run_main(capsys, "status", "--root", str(ws.root), "--json")
    report = json.loads(out)
    assert rc == 0 and report["state"]["status"] == "ERROR"  # the existing keys stay
    assert report["summary"].startswith("not running; halted: MP-7.2 ERROR awaiting approval (")
    last = report["last_mp"]
    assert last["mp_id"] == "MP-7.2" and last["status"] == "ERROR" and last["title"] == "Break on purpose"
    assert last["duration"] >= 0 and last["ago"] == "just now"
    assert report["halt"]["mp_id"] == "MP-7.2"
    err = report["last_error"]
    assert err["event"] == "mp_failed" and err["mp"] == "MP-7.2" and "exit" in err["message"]


def test_status_plain_off_a_tty_and_coloured_on_one(two_mps, capsys):
    ws = two_mps
    rc, out = run_main(capsys, "status", "--root", str(ws.root))
    assert rc == 0 and "\x1b[" not in out  # captured stdout is not a TTY: plain text
    assert "  doing:           not running; halted: MP-7.2 ERROR awaiting approval" in out
    assert "  last result:     MP-7.2 Break on purpose ERROR, " in out
    assert "  halted on:       MP-7.2: " in out and "  last error:      mp_failed just now: " in out
    coloured = render_status(status_report(ws, load_config(ws.root)), color=True)
    assert "\x1b[31m\x1b[1mERROR\x1b[0m" in coloured  # the state in bold red


def test_history_lists_past_mps_newest_first(two_mps, capsys):
    ws = two_mps
    rc, out = run_main(capsys, "history", "--root", str(ws.root), "-n", "1", "--json")
    entries = json.loads(out)
    assert rc == 0 and [e["mp_id"] for e in entries] == ["MP-7.2"]
    e = entries[0]
    assert e["title"] == "Break on purpose" and e["status"] == "ERROR" and e["certificate"] is None
    assert e["duration"] >= 0 and e["finished_at"].endswith("Z")
    rc, out = run_main(capsys, "history", "--root", str(ws.root))
    lines = out.splitlines()
    assert lines[0].split() == ["MP", "TITLE", "STATUS", "CERT", "DURATION", "FINISHED", "(UTC)", "RUN"]
    assert lines[1].startswith("MP-7.2  Break on purpose  ERROR") and lines[2].startswith("MP-7.1  Say hello")


def test_status_shows_the_step_of_a_running_mp(ws, daemon_factory, capsys):
    d = daemon_factory(ws.root).start()
    drop(ws, BLOCKING_MP)
    wait_for(lambda: (ws.root / "started").exists(), what=d.output)
    rc, out = run_main(capsys, "status", "--root", str(ws.root), "--json")
    report = json.loads(out)
    step = report["step"]
    assert {k: step[k] for k in ("id", "number", "of")} == {"id": "step-001", "number": 1, "of": 2}
    assert step["elapsed"] >= 0 and step["time_left"] > 0 and step["started_at"].endswith("Z")
    assert report["summary"] == "running MP-9.1 step 1/2"
    rendered = render_status(report)
    assert "  current:         MP-9.1, step 1/2 (step-001)" in rendered
    (ws.root / "release").touch()
    wait_for(lambda: read_state(ws)["last_completed"] == "MP-9.1", what=d.output)
    d.signal(signal.SIGTERM)
    assert d.wait() == 0


def test_status_line_of_an_agent_run_names_task_iteration_and_level(ws):
    run, _ = create_run(ws, mp_id="MP-1.5", data=b"# MP-1.5\n", mp_sha256="0" * 64, executor="agent")
    progress = Progress.create(run.dir, mp_id="MP-1.5", run_id=run.run_id, policy={}, tasks=[], base={})
    progress.data["current_state"] = {"active_mt": "MT-002", "iteration": 3, "level": 1, "level_name": "claude"}
    progress.save()
    state = SessionState(status="RUNNING", current="MP-1.5", run_id=run.run_id)
    assert status_line(ws, state) == "running MP-1.5 MT-002 iteration 3 level 1"


def test_ago_is_coarse():
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def at(**delta) -> str:
        return (now - timedelta(**delta)).isoformat().replace("+00:00", "Z")

    assert ago(at(seconds=59), now) == "just now"
    assert ago(at(minutes=3, seconds=20), now) == "3 min ago"
    assert ago(at(hours=2, minutes=59), now) == "2 h ago"
    assert ago(at(days=5), now) == "5 d ago"
    assert ago(None, now) == "never"


def test_last_sync_in_status_and_metrics_and_sync_failures_counted(tmp_path, daemon_factory, capsys):
    bare = make_remote(tmp_path)
    ws = engine_workspace(tmp_path, str(bare), poll_interval=0.3, timeout=10)
    env = {"MP_ENGINE_METRICS__LISTEN": "127.0.0.1:0"}
    d = daemon_factory(ws.root, env=env).start()
    wait_for(lambda: (ws.local_dir / "last_sync_ok").exists(), what=d.output)
    rc, out = run_main(capsys, "status", "--root", str(ws.root), "--json")
    report = json.loads(out)
    assert report["last_sync"]["ago"] == "just now" and report["git"]["unpushed"] == 0
    from tests.conftest import events

    address = wait_for(lambda: events(ws, "metrics_listening"))[-1]["address"]
    since = scrape(address)["mp_engine_seconds_since_last_sync"]
    assert not math.isnan(since) and since >= 0

    bare.rename(tmp_path / "away.git")  # the remote goes away: polls fail
    wait_for(
        lambda: scrape(address)['mp_engine_sync_failures_total{event="sync_unreachable"}'] >= 1,
        what=d.output,
    )
    rc, out = run_main(capsys, "status", "--root", str(ws.root), "--json")
    assert json.loads(out)["last_error"]["event"] == "sync_unreachable"
    d.signal(signal.SIGTERM)
    assert d.wait() == 0


def test_a_pending_mp_that_will_be_refused_shows_why_before_the_engine_takes_it(ws):
    ws.inbox_file.write_text("# MP-4.2\nTimeout: soon\n```bash\ntrue\n```\n")
    report = status_report(ws, load_config(ws.root))
    assert report["pending"]["path"] == "Claude_Inbox/incoming_microproject.txt"
    assert "`Timeout: soon` is invalid" in report["pending"]["invalid"]


def test_the_lock_holder_is_named_while_another_engine_works(ws):
    from mp_engine.core.lock import WorkspaceLock

    with WorkspaceLock(ws.lock_file, 1).hold("tick"):
        holder = status_report(ws, load_config(ws.root))["lock_holder"]
    assert holder["purpose"] == "tick" and holder["pid"] == os.getpid()
    assert "lock_holder" not in status_report(ws, load_config(ws.root))


def test_a_stop_file_is_reported_by_status_and_doctor(ws, capsys):
    from mp_engine.commands.doctor.run import run_checks

    (ws.system_dir / "STOP").write_text("")
    assert "SYSTEM/STOP exists" in render_status(status_report(ws, load_config(ws.root)))
    [check] = [c for c in run_checks(ws.root) if c.name == "stop file"]
    assert check.level == "warn" and "rm " in check.fix
    (ws.system_dir / "STOP").unlink()
    assert "stop file" not in render_status(status_report(ws, load_config(ws.root)))


def test_a_config_typo_does_not_blind_status_or_logs(ws, capsys):
    """`step_timout` (a typo) in mp-engine.toml: status and logs still show what they can,
    with the error named (issue #15); the daemon itself still refuses to start (exit 2)."""
    ws.config_file.write_text(ws.config_file.read_text().replace("step_timeout", "step_timout"))
    capsys.readouterr()
    assert main(["status", "--root", str(ws.root)]) == 0
    out = capsys.readouterr().out
    assert "status:" in out and "config error:" in out and "step_timout" in out
    assert main(["status", "--root", str(ws.root), "--json"]) == 0
    assert "step_timout" in json.loads(capsys.readouterr().out)["config_error"]
    assert main(["logs", "--root", str(ws.root)]) == 0
    assert "warning:" in capsys.readouterr().out
    assert main(["once", "--root", str(ws.root)]) == 2


def test_nothing_an_mp_controls_reaches_the_terminal_raw(ws, capsys, monkeypatch):
    """An MP title with an OSC (retitles the terminal), CSI 2J (clears it), BEL and a C1
    CSI: status, history and logs print them escaped (issue #20); --json stays JSON."""
    from mp_engine.pipeline.engine import Engine

    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    engine = Engine(ws, load_config(ws.root))
    engine.start(daemon=False)
    evil = "\x1b]0;pwned\x07\x1b[2J\x9b2J"
    drop(ws, f"# MP-9.9 Title {evil}\n\n```bash\necho '{evil}' >&2; exit 1\n```\n")
    assert engine.tick().action == "error"
    capsys.readouterr()
    for args in (["status"], ["history"], ["logs", "-n", "50"]):
        assert main([*args, "--root", str(ws.root)]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out, args
        if args[0] != "logs":  # the title, escaped (the log's JSON escapes C0 itself)
            assert "\\x1b]0;pwned\\x07" in out, (args, out)
    assert main(["status", "--root", str(ws.root), "--json"]) == 0
    json.loads(capsys.readouterr().out)


def test_status_shows_the_budgets_spent_today_and_this_month(ws, capsys, monkeypatch):
    """Issue #42: every MP's agent calls together, against `[agent] daily_cost_usd` and
    `monthly_cost_usd`; spent, it says until when calls wait."""
    from mp_engine.record.spend import SPEND_FILE, SpendLog

    text = ws.config_file.read_text()
    ws.config_file.write_text(
        text.replace("[agent]\n", "[agent]\ndaily_cost_usd = 2.0\nmonthly_cost_usd = 40.0\n", 1).replace(
            'budget_clock = "local"', 'budget_clock = "UTC"'
        )
    )
    SpendLog(ws.local_dir / SPEND_FILE, "UTC").charge("run/k", 1.5, mp="MP-1")
    rc, out = run_main(capsys, "status", "--root", str(ws.root))
    assert rc == 0 and "budget:          $1.5000 of $2 today, $1.5000 of $40 this month" in out
    SpendLog(ws.local_dir / SPEND_FILE, "UTC").charge("run/k2", 1.0, mp="MP-2")
    report = status_report(ws, load_config(ws.root))
    assert report["budget"]["day"]["left_usd"] == 0.0 and report["budget"]["month"]["left_usd"] == 37.5
    assert "SPENT: agent calls wait until " + report["budget"]["day"]["resets_at"] in render_status(report)


def test_status_says_the_last_result_s_pull_request_and_those_waiting_for_review(ws):
    from mp_engine.forge.watch import Watched, WatchList

    cfg = load_config(ws.root).model_dump(mode="json")
    cfg["repos"] = {"app": {"review_rounds": 3, "review_poll": 60.0}}  # as [repos.app] sets them
    url = "https://github.com/me/app/pull/4"
    WatchList.at(ws.local_dir).put(
        Watched("app", 4, url, "mp/MP-8.1", "main", "r-8", "MP-8.1", "2026-11-24T12:00:00Z", "c" * 40, True, 1)
    )
    report = status_report(ws, cfg)
    (w,) = report["for_review"]
    assert (w["number"], w["url"], w["ci"], w["review_rounds"], w["review_rounds_max"]) == (4, url, "passed", 1, 3)
    report["state"]["last_result"] = {"mp_id": "MP-8.1", "status": "COMPLETED", "run_id": "r-8"}
    report["last_mp"] = {
        **report["state"]["last_result"],
        "pull_request": {"number": 4, "url": url, "ci_rounds": [{"state": "passed"}], "review_rounds": 1},
    }
    out = render_status(report)
    assert f"  pull request:    #4 {url}; CI: passed; CI rounds 1, review rounds 1" in out
    assert f"  for review:      MP-8.1 #4 {url} (CI passed; review rounds 1 of 3; a reviewer's comment" in out
    WatchList.at(ws.local_dir).drop("app#4")
    assert "for_review" not in status_report(ws, cfg)  # none waits: nothing said
