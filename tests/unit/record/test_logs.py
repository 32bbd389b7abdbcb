"""Logging: every line on stderr is JSON off a TTY, including third-party `logging` records."""

from __future__ import annotations

import json
import logging

import structlog

from mp_engine.record import logs


def _lines(capsys) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.strip()]


def test_stdlib_records_share_the_json_format(capsys):
    logs.configure(json_lines=True)
    try:
        logging.getLogger("git.cmd").warning("push failed: %s", "remote hung up")
        structlog.get_logger().info("mp_claimed", mp="MP-1.0")
        lines = _lines(capsys)
    finally:
        logging.getLogger().handlers.clear()
    assert lines[0]["event"] == "push failed: remote hung up"
    assert lines[0]["logger"] == "git.cmd" and lines[0]["level"] == "warning"
    assert lines[1]["event"] == "mp_claimed" and lines[1]["mp"] == "MP-1.0"


def test_watchdog_stop_race_is_not_reported_as_an_error(capsys):
    logs.configure(json_lines=True)
    try:
        logging.getLogger("watchdog.observers.inotify").error(logs._BENIGN_WATCHDOG_STOP)
        logging.getLogger("watchdog.observers.inotify").error("a real watchdog error")
        lines = _lines(capsys)
    finally:
        logging.getLogger().handlers.clear()
    assert [line["event"] for line in lines] == ["a real watchdog error"]


def test_readable_lines_on_a_terminal_and_the_level_filters(capsys):
    logs.configure("warning", json_lines=False)
    try:
        structlog.get_logger().info("hidden", mp="MP-1.0")
        structlog.get_logger().warning("sync_failed", stage="poll")
        err = capsys.readouterr().err
    finally:
        logging.getLogger().handlers.clear()
        logs.configure("info", json_lines=True)
        logging.getLogger().handlers.clear()
    assert "hidden" not in err
    line = err.strip().splitlines()[-1]
    assert "sync_failed" in line and "stage=poll" in line and not line.startswith("{")
