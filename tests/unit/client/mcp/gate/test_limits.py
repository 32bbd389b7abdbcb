"""The limits: defaults, and `--limit NAME=VALUE` changes refused with the reason."""

from __future__ import annotations

import pytest

from mp_engine.client.mcp.gate.limits import Limits
from mp_engine.core.errors import ConfigError


def test_a_pair_changes_one_limit_and_keeps_its_type():
    limits = Limits.parse(["backoff_s=0.5", "registrations-per-hour=3"])
    assert limits.backoff_s == 0.5 and limits.registrations_per_hour == 3 and isinstance(limits.max_clients, int)
    assert limits.request_failures == Limits().request_failures


@pytest.mark.parametrize(
    ("pair", "says"),
    [
        ("nonsense=1", "known NAME"),
        ("backoff_s", "known NAME"),
        ("max_clients=many", "not a number"),
        ("max_clients=0", "above 0"),
        ("max_clients=1.5", "not a number"),
    ],
)
def test_a_wrong_pair_is_refused_saying_why(pair, says):
    with pytest.raises(ConfigError, match=says):
        Limits.parse([pair])
