"""`[notify]`: alerts to a person (README, Operations)."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from mp_engine.config.section import Section

AlertKind = Literal[
    "halt",
    "blocked",
    "error",
    "completed",
    "cancelled",
    "engine_down",
    "push_refused",
    "drift",
    "budget",
    "pull_request",
]
ALERT_KINDS: tuple[AlertKind, ...] = get_args(AlertKind)


class NotifyConfig(Section):
    """`[notify]`: alerts when something needs a person (README, Operations). Off unless
    `urls`, `urls_env` or `command` is set."""

    on: tuple[AlertKind, ...] = Field(
        ("halt", "blocked", "engine_down", "push_refused", "drift", "budget", "pull_request"),
        description="what is worth an alert",
    )
    urls: tuple[str, ...] = Field((), description="Apprise URLs: ntfy://, slack://, mailto://, json://, ...")
    urls_env: str = Field(
        "", description="an environment variable holding more Apprise URLs (tokens stay out of this file)"
    )
    command: tuple[str, ...] = Field((), description="argv run with each alert as JSON on stdin")
    retry_for: float = Field(3600.0, gt=0, description="seconds an undelivered alert is retried")
    timeout: float = Field(30.0, gt=0, description="seconds one delivery may take")

    @property
    def enabled(self) -> bool:
        return bool(self.urls or self.urls_env or self.command)
