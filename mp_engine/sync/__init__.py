"""The git channel: pull what the orchestrator pushed, push what the engine recorded.

`channel_for(ws, config)` picks the real `GitChannel` or, with git off, `LocalChannel`."""

from __future__ import annotations

from collections.abc import Callable

from mp_engine.config import Config
from mp_engine.sync.channel import GitChannel
from mp_engine.sync.local import LocalChannel
from mp_engine.workspace import Workspace

Channel = GitChannel | LocalChannel


def channel_for(ws: Workspace, config: Config, redact: Callable[[str], str] | None = None) -> Channel:
    return GitChannel(ws, config.git, redact=redact) if config.git.enabled else LocalChannel()


__all__ = ["Channel", "GitChannel", "LocalChannel", "channel_for"]
