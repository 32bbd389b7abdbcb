"""`mp-engine notify test`: send one alert to every `[notify]` target now and say, per
target, whether it arrived (the alerts themselves come from the daemon's events)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mp_engine.config.load import load_workspace
from mp_engine.core import secretenv
from mp_engine.core.errors import ConfigError
from mp_engine.core.exitcodes import ExitCode


def notify_test(root: Path, echo: Callable[[str], None]) -> ExitCode:
    from mp_engine.alerts.deliver import Alerter
    from mp_engine.alerts.rules import Alert
    from mp_engine.sync.redact import Redactor

    ws, config = load_workspace(root)
    if not config.notify.enabled:
        raise ConfigError(
            f"{ws.config_file} has no [notify] urls, urls_env or command. Fix: add one, e.g. "
            '[notify] urls = ["ntfy://ntfy.sh/my-topic"] (README, Operations).'
        )
    held = secretenv.hold(config.secret_names, config.secrets.env_patterns)
    try:
        alerter = Alerter(
            config.notify,
            ws.local_dir / "alerts-test.jsonl",
            str(ws.root),
            emit=lambda *a, **k: None,
            redact=Redactor.from_config(config),
            environ=secretenv.environ(),
        )
        alert = Alert(
            "test",
            "mp-engine: a test alert",
            "This is a test of [notify]; nothing needs doing.",
            "",
            None,
            {"event": "notify_test"},
            root=str(ws.root),
        )
        results = alerter.deliver(alert, retry=False)
    finally:
        if held:
            secretenv.release()
    for target, error in results.items():
        echo(f"{target}: " + ("sent" if error is None else f"FAILED: {error}"))
    return ExitCode.OK if all(e is None for e in results.values()) else ExitCode.MP_ERROR
