"""Alerts through the real daemon (issue #32): a halt reaches a local HTTP receiver through
an Apprise `json://` URL and a command, with the command that lifts it; alerts queued while
the receiver is down arrive when it is back, and the engine's MPs did not wait for them;
`mp-engine notify test`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from tests.alertutil import Receiver, set_notify
from tests.conftest import drop, read_state, wait_for

pytestmark = pytest.mark.daemon

FAILS = "# MP-5.1 Fails\n\n```bash\nexit 3\n```\n"
OK = "# MP-5.{n} Works\n\n```bash\necho fine\n```\n\n## Validate\n\n```bash\ntrue\n```\n"


def notify(ws, **values) -> None:
    set_notify(ws.config_file, **values)


def test_a_halt_reaches_a_person_with_the_command_that_lifts_it(ws, tmp_path, daemon_factory):
    receiver = Receiver().start()
    out = tmp_path / "alerts.jsonl"
    script = f"import sys; open({str(out)!r}, 'a').write(sys.stdin.read() + chr(10))"
    notify(ws, urls=[receiver.url], command=[sys.executable, "-c", script])
    d = daemon_factory(ws.root).start()
    try:
        wait_for(lambda: read_state(ws)["status"] == "ONLINE", what=d.output)
        drop(ws, FAILS)
        wait_for(lambda: receiver.got and out.exists(), timeout=30, what=d.output)
        (posted,) = receiver.got
        assert posted["title"] == "mp-engine halted on MP-5.1"
        assert "Approves: MP-5.1" in posted["message"] and f"mp-engine approve --root {ws.root}" in posted["message"]
        (sent,) = [json.loads(line) for line in out.read_text().splitlines()]
        assert sent["kind"] == "halt" and sent["mp"] == "MP-5.1" and sent["event"]["event"] == "halted"
    finally:
        d.signal(signal.SIGTERM)
        d.wait()
        receiver.stop()


def test_alerts_wait_for_a_receiver_that_is_down_and_the_engine_does_not(ws, daemon_factory):
    receiver = Receiver()  # down while the MPs run
    notify(ws, urls=[receiver.url], on=["completed"])
    d = daemon_factory(ws.root).start()
    try:
        wait_for(lambda: read_state(ws)["status"] == "ONLINE", what=d.output)
        for n in (2, 3, 4):
            drop(ws, OK.format(n=n))
            wait_for(
                lambda n=n: (read_state(ws).get("last_result") or {}).get("mp_id") == f"MP-5.{n}",
                timeout=30,
                what=d.output,
            )
        assert not receiver.got  # the MPs ran while no alert could be delivered
        receiver.start()
        wait_for(lambda: len(receiver.got) == 3, timeout=60, what=d.output)
        assert [g["title"] for g in receiver.got] == [f"mp-engine: MP-5.{n} completed" for n in (2, 3, 4)]
    finally:
        d.signal(signal.SIGTERM)
        d.wait()
        receiver.stop()


def test_notify_test_sends_one_alert_and_says_where_it_arrived(ws):
    receiver = Receiver().start()
    notify(ws, urls=[receiver.url])
    try:
        run = subprocess.run(
            [sys.executable, "-m", "mp_engine", "notify", "test", "--root", str(ws.root)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        receiver.stop()
    assert run.returncode == 0 and f"json://127.0.0.1:{receiver.port}: sent" in run.stdout, run.stdout + run.stderr
    assert receiver.got[0]["title"] == "mp-engine: a test alert"
    down = subprocess.run(
        [sys.executable, "-m", "mp_engine", "notify", "test", "--root", str(ws.root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert down.returncode == 1 and "FAILED" in down.stdout
