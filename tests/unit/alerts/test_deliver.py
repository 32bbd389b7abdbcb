"""Delivering alerts (mp_engine/alerts/deliver.py) to a real local HTTP receiver through
Apprise's `json://` URL and to a command: in order, retried while the receiver is down,
kept for the next start when the engine stops first, an event when it fails for good."""

from __future__ import annotations

import json
import sys

import pytest

from mp_engine.alerts.deliver import Alerter
from mp_engine.config.notify import NotifyConfig
from mp_engine.core.errors import ConfigError
from tests.alertutil import Receiver
from tests.conftest import wait_for

HALTED = [
    {"event": "mp_failed", "mp": "MP-1.4", "kind": "step_failed", "summary": "step 2 exited 1", "fix": "fix it"},
    {"event": "halted", "mp": "MP-1.4", "approve_with": "Approves: MP-1.4"},
]


def alerter(tmp_path, events: list, **cfg) -> Alerter:
    return Alerter(
        NotifyConfig(**cfg),
        tmp_path / "alerts.jsonl",
        str(tmp_path),
        environ={"SECRET_URLS": ""},
        emit=lambda name, **f: events.append({"event": name, **f}),
        redact=lambda t: t.replace("hunter2", "********"),
    )


def test_an_alert_reaches_an_apprise_json_url_and_a_command(tmp_path):
    receiver = Receiver().start()
    out = tmp_path / "cmd.json"
    script = f"import sys; open({str(out)!r}, 'a').write(sys.stdin.read() + chr(10))"
    events: list = []
    a = alerter(tmp_path, events, urls=(receiver.url,), command=(sys.executable, "-c", script)).start()
    try:
        for e in HALTED:
            a.on_event(e)
        wait_for(lambda: receiver.got and out.exists(), timeout=20)
    finally:
        a.close()
        receiver.stop()
    (posted,) = receiver.got
    assert posted["title"] == "mp-engine halted on MP-1.4" and "Approves: MP-1.4" in posted["message"]
    (sent,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert sent["kind"] == "halt" and sent["mp"] == "MP-1.4" and "mp-engine approve" in sent["act"]
    assert [e["to"] for e in events if e["event"] == "alert_sent"] == [
        "json://127.0.0.1:" + str(receiver.port),
        f"command {sys.executable}",
    ]
    assert not (tmp_path / "alerts.jsonl").exists()  # nothing pending


def test_alerts_wait_for_a_receiver_that_is_down_and_none_is_lost(tmp_path):
    receiver = Receiver()  # not listening yet
    events: list = []
    a = alerter(tmp_path, events, urls=(receiver.url,), on=("completed",))
    tries: list[str | None] = []
    send = a.targets[0].send
    a.targets[0].send = lambda alert: tries.append(send(alert)) or tries[-1]
    a.start()
    try:
        for n in range(3):
            a.on_event({"event": "mp_completed", "mp": f"MP-1.{n}", "duration": 1})
        wait_for(lambda: len(tries) >= 2, timeout=20)  # refused, and tried again
        assert tries[0] is not None and not receiver.got
        receiver.start()  # back, on the same port
        wait_for(lambda: len(receiver.got) == 3, timeout=30)
    finally:
        a.close()
        receiver.stop()
    assert [g["title"] for g in receiver.got] == [f"mp-engine: MP-1.{n} completed" for n in range(3)]


def test_a_stopping_engine_keeps_what_it_could_not_deliver_for_the_next_start(tmp_path):
    receiver = Receiver()  # down for good, for this engine
    events: list = []
    a = alerter(tmp_path, events, urls=(receiver.url,), on=("completed",)).start()
    a.on_event({"event": "mp_completed", "mp": "MP-1.0", "duration": 1})
    a.close(flush=0.5)
    assert any(e["event"] == "alert_deferred" for e in events)
    receiver.start()
    try:
        b = alerter(tmp_path, [], urls=(receiver.url,), on=("completed",)).start()
        wait_for(lambda: receiver.got, timeout=20)
        b.close()
    finally:
        receiver.stop()
    assert receiver.got[0]["title"] == "mp-engine: MP-1.0 completed"


def test_a_target_that_never_takes_it_is_an_event_and_the_alert_is_dropped(tmp_path):
    events: list = []
    a = alerter(tmp_path, events, command=("false",), on=("completed",), retry_for=0.1).start()
    a.on_event({"event": "mp_completed", "mp": "MP-1.0", "duration": 1})
    wait_for(lambda: any(e["event"] == "alert_failed" for e in events), timeout=20)
    a.close()
    (failed,) = [e for e in events if e["event"] == "alert_failed"]
    assert failed["to"] == "command false" and failed["error"].startswith("exit 1")
    assert not (tmp_path / "alerts.jsonl").exists()


def test_secrets_are_masked_before_an_alert_leaves_and_a_bad_url_is_a_config_error(tmp_path):
    out = tmp_path / "cmd.json"
    script = f"import sys; open({str(out)!r}, 'w').write(sys.stdin.read())"
    a = alerter(tmp_path, [], command=(sys.executable, "-c", script), on=("error",)).start()
    a.on_event({"event": "mp_failed", "mp": "MP-1.0", "kind": "k", "summary": "token hunter2 leaked", "fix": "f"})
    wait_for(lambda: out.exists() and out.read_text(), timeout=20)
    a.close()
    assert "hunter2" not in out.read_text() and "********" in out.read_text()
    with pytest.raises(ConfigError, match="Apprise cannot use"):
        alerter(tmp_path, [], urls=("nosuchservice://x",))
