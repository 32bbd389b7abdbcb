"""Timestamps in the one format mp-engine writes: ISO 8601, UTC, millisecond precision."""

from __future__ import annotations

from datetime import UTC, datetime


def now_iso() -> str:
    """Current time as `2026-11-22T15:16:00.123Z`."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def iso_at(epoch: float) -> str:
    """The epoch second `epoch` as `now_iso` writes a time."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def compact_stamp() -> str:
    """Current time as `20261122T151600Z`, for directory names that sort by time."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def parse_iso(value: str) -> datetime:
    """Parse a timestamp written by `now_iso` (or any ISO 8601 string with a zone)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def seconds_until(iso: str | None) -> float:
    """Seconds from now until the ISO timestamp `iso` (0 if absent or past)."""
    if not iso:
        return 0.0
    return max(0.0, (parse_iso(iso) - datetime.now(UTC)).total_seconds())
