"""structlog set-up, called once by the CLI: JSON lines off a TTY, readable lines on one.

Records from the standard `logging` module (watchdog, GitPython, filelock) go through the
same renderer, so stderr carries one format only and the journal can parse every line.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog
from structlog.typing import Processor

# watchdog logs this at ERROR when its inotify thread is stopped while a read is in flight
# (upstream PR gorakhargosh/watchdog#963): a benign shutdown race, so it is demoted to DEBUG.
_BENIGN_WATCHDOG_STOP = "InotifyEmitter.queue_events() called when the thread is inactive"


class _StderrHandler(logging.StreamHandler):
    """A stream handler that resolves `sys.stderr` at each record (tests and daemonizers swap it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


def _demote_benign(record: logging.LogRecord) -> bool:
    if record.levelno >= logging.ERROR and record.getMessage() == _BENIGN_WATCHDOG_STOP:
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
    return record.levelno >= logging.root.level


def configure(level: str = "info", json_lines: bool | None = None) -> None:
    """Send structured logs to stderr; JSON when stderr is not a TTY (systemd's journal)."""
    if json_lines is None:
        json_lines = not sys.stderr.isatty()
    numeric = getattr(logging, level.upper(), logging.INFO)
    renderer = structlog.processors.JSONRenderer() if json_lines else structlog.dev.ConsoleRenderer(colors=False)
    shared: list[Processor] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        # Resolve sys.stderr at each call, not once: it may be replaced (tests, daemonizers).
        logger_factory=lambda *_args: structlog.PrintLogger(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    handler = _StderrHandler()
    handler.addFilter(_demote_benign)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
