"""The git channel: pull what the orchestrator pushed, push what the engine recorded.

`channel_for(ws, config)` picks the real `GitChannel` or, with git off, `LocalChannel`."""

from __future__ import annotations

from mp_engine.config import Config
from mp_engine.sync.channel import GitChannel
from mp_engine.sync.local import LocalChannel
from mp_engine.sync.redact import Redactor
from mp_engine.workspace import Workspace

Channel = GitChannel | LocalChannel


def channel_for(ws: Workspace, config: Config, redact: Redactor | None = None) -> Channel:
    return GitChannel(ws, config.git, redact=redact) if config.git.enabled else LocalChannel()


__all__ = ["Channel", "GitChannel", "LocalChannel", "channel_for"]
