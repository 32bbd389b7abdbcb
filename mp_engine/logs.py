"""structlog set-up, called once by the CLI: JSON lines off a TTY, readable lines on one."""

from __future__ import annotations

import logging
import sys

import structlog


def configure(level: str = "info", json_lines: bool | None = None) -> None:
    """Send structured logs to stderr; JSON when stderr is not a TTY (systemd's journal)."""
    if json_lines is None:
        json_lines = not sys.stderr.isatty()
    renderer = structlog.processors.JSONRenderer() if json_lines else structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper(), logging.INFO)),
        # Resolve sys.stderr at each call, not once: it may be replaced (tests, daemonizers).
        logger_factory=lambda *_args: structlog.PrintLogger(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
