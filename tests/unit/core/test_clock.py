"""Timestamps in the one format mp-engine writes."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from mp_engine.core.clock import compact_stamp, iso_at, now_iso, parse_iso, seconds_until


def test_now_iso_is_utc_with_milliseconds_and_parses_back():
    stamp = now_iso()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp)
    assert abs((parse_iso(stamp) - datetime.now(UTC)).total_seconds()) < 5


def test_an_epoch_second_is_written_as_now_iso_writes_a_time():
    at = datetime(2026, 11, 22, 15, 16, 0, 500000, tzinfo=UTC)
    assert iso_at(at.timestamp()) == "2026-11-22T15:16:00.500Z"
    assert parse_iso(iso_at(0)) == datetime(1970, 1, 1, tzinfo=UTC)


def test_compact_stamps_sort_by_time():
    assert re.fullmatch(r"\d{8}T\d{6}Z", compact_stamp())


def test_seconds_until_is_never_negative():
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert 3500 < seconds_until(later) <= 3600
    assert seconds_until("2000-01-01T00:00:00Z") == 0.0
    assert seconds_until(None) == 0.0 and seconds_until("") == 0.0
