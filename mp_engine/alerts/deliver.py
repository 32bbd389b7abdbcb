"""Delivering alerts: to each Apprise URL (`[notify] urls`, `urls_env`: ntfy, Slack,
Discord, Telegram, Matrix, e-mail, JSON webhooks, ...) and to a command (`[notify]
command`, the alert as JSON on stdin). The engine's event listener only queues (and
writes the outbox); a thread of its own delivers, in order, retrying each target with
backoff (1 s doubling to a minute) for `retry_for` seconds. A delivery that fails for
good is an event (`alert_failed`), never a crash.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mp_engine.alerts.outbox import Outbox
from mp_engine.alerts.rules import Alert, Rules
from mp_engine.config.notify import NotifyConfig
from mp_engine.core.errors import ConfigError

BACKOFF_MAX = 60.0
FLUSH = 5.0  # seconds a stopping engine waits for the alerts still queued


@dataclass
class Target:
    name: str  # what the events and `notify test` call it (an URL's scheme and host, or the command)
    send: Callable[[Alert], str | None]  # None: delivered; else why not


def apprise_target(url: str) -> Target:
    import apprise  # only with [notify] urls: it is large

    a = apprise.Apprise()
    if not a.add(url):
        scheme = url.split("://", 1)[0]
        raise ConfigError(f"[notify] has a URL Apprise cannot use ({scheme}://...). Fix it (Apprise's URL syntax).")

    def send(alert: Alert) -> str | None:
        ok = a.notify(title=alert.title, body=alert.text(), notify_type="failure" if alert.act else "info")
        return None if ok else "the service did not accept it (Apprise logged why)"

    scheme, _, rest = url.partition("://")
    return Target(f"{scheme}://{rest.split('/', 1)[0].split('@')[-1]}", send)


def command_target(argv: tuple[str, ...], timeout: float) -> Target:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TZ")}

    def send(alert: Alert) -> str | None:
        try:
            p = subprocess.run(
                list(argv),
                input=json.dumps(alert.to_dict()),
                text=True,
                capture_output=True,
                timeout=timeout,
                env=env,
                start_new_session=True,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return str(e)
        return None if p.returncode == 0 else f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}"

    return Target(f"command {argv[0]}", send)


def targets(cfg: NotifyConfig, environ: Mapping[str, str]) -> list[Target]:
    urls = list(cfg.urls)
    if cfg.urls_env:
        urls += environ.get(cfg.urls_env, "").split()
    out = [apprise_target(u) for u in urls]
    if cfg.command:
        out.append(command_target(cfg.command, cfg.timeout))
    return out


class Alerter:
    """The engine's alerts: `on_event` (an EventLog listener) queues; a thread delivers."""

    def __init__(
        self,
        cfg: NotifyConfig,
        outbox: Path,
        root: str,
        *,
        emit: Callable[..., Any],
        redact: Callable[[str], str],
        environ: Mapping[str, str],
    ):
        self.cfg = cfg
        self.rules = Rules(root, cfg.on)
        self.outbox = Outbox(outbox)
        self.targets = targets(cfg, environ)
        self.emit = emit
        self.redact = redact
        self.queue: queue.Queue[Alert | None] = queue.Queue()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="mp-alerts", daemon=True)

    def start(self) -> Alerter:
        for a in self.outbox.pending():  # what an earlier engine could not deliver
            self.queue.put(a)
        self.thread.start()
        return self

    def on_event(self, record: dict[str, Any]) -> None:
        if record.get("event", "").startswith("alert_"):
            return
        alert = self.rules.alert(record)
        if alert is None:
            return
        alert = Alert.from_dict(json.loads(self.redact(json.dumps(alert.to_dict(), ensure_ascii=False))))
        alert.event["at"] = record.get("ts")
        self.queue.put(self.outbox.add(alert))

    def close(self, flush: float = FLUSH) -> None:
        """Deliver what is queued for up to `flush` seconds, then stop (the rest stays in
        the outbox for the next start)."""
        if not self.thread.is_alive():
            return
        self.queue.put(None)
        self.thread.join(flush)
        self.stop.set()
        self.thread.join(5)

    def _run(self) -> None:
        while True:
            alert = self.queue.get()
            if alert is None:
                return
            self.deliver(alert)
            if self.stop.is_set():
                return

    def deliver(self, alert: Alert, *, retry: bool = True) -> dict[str, str | None]:
        """Send `alert` to every target: {target: None (delivered) or the last error}."""
        results: dict[str, str | None] = {}
        deadline = time.monotonic() + (self.cfg.retry_for if retry else 0)
        for t in self.targets:
            delay = 1.0
            while True:
                try:
                    error = t.send(alert)
                except Exception as e:  # noqa: BLE001 - a sender's bug must not end delivery
                    error = f"{type(e).__name__}: {e}"
                if error is None or not retry or time.monotonic() + delay > deadline or self.stop.is_set():
                    break
                if self.stop.wait(delay):
                    break
                delay = min(BACKOFF_MAX, delay * 2)
            results[t.name] = error
            if error is None:
                self.emit("alert_sent", kind=alert.kind, mp=alert.mp, to=t.name, alert=alert.id)
            elif self.stop.is_set():  # the engine stops: the outbox keeps it for the next start
                self.emit("alert_deferred", kind=alert.kind, mp=alert.mp, to=t.name, alert=alert.id, error=error[:300])
            else:
                self.emit("alert_failed", kind=alert.kind, mp=alert.mp, to=t.name, alert=alert.id, error=error[:300])
        if retry and not self.stop.is_set():
            self.outbox.done(alert)
        return results
