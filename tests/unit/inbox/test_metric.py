"""Metric goals on a check's fence (issue #34): the syntax, the value a check printed last,
the distance to the target; a malformed metric is refused with its fix."""

from __future__ import annotations

import pytest

from mp_engine.core.errors import InvalidMPError
from mp_engine.inbox.metric import Metric, parse, value_of
from mp_engine.inbox.mpfile import parse as parse_mp


def test_the_fence_attribute_names_a_metric_an_operator_and_a_target():
    assert parse('metric="coverage >= 0.90"') == Metric("coverage", ">=", 0.9)
    assert parse("metric='p95_ms<200'") == Metric("p95_ms", "<", 200.0)
    assert parse('title="x" metric="score == 1e2"') == Metric("score", "==", 100.0)
    assert parse("") is None and parse('title="nothing"') is None
    for bad in ("metric=coverage>=0.9", 'metric="coverage at least 0.9"', 'metric=">= 0.9"', 'metric="c >= high"'):
        with pytest.raises(ValueError, match='metric="NAME OP TARGET"'):
            parse(bad)


def test_the_value_is_the_number_on_the_last_non_empty_line():
    assert value_of("collected 12 items\nTOTAL 91%\n0.91\n\n") == 0.91
    assert value_of("87.5%\n") == 87.5 and value_of("183ms") == 183.0 and value_of("-.5") == -0.5
    assert value_of("0.91 of the lines\n") is None and value_of("") is None


def test_met_and_the_distance_left():
    cov = Metric("coverage", ">=", 0.9)
    assert cov.met(0.9) and not cov.met(0.89)
    assert cov.distance(0.92) == 0 and cov.distance(None) == 1.0
    assert 0 < cov.distance(0.8) < cov.distance(0.7) < 1  # closer is smaller
    p95 = Metric("p95_ms", "<", 200)
    assert p95.distance(400) == 0.5 and p95.distance(199) == 0  # d = 1, squashed to 1/2
    assert Metric("errors", "==", 0).distance(3) == 0.75  # a zero target: the plain difference


def test_a_metric_on_a_check_is_parsed_and_a_bad_one_is_refused_with_its_fix():
    mp = parse_mp(b'# MP-1.1\n\n```bash\ntrue\n```\n\n## Validate\n\n```bash metric="coverage >= 0.9"\necho 1\n```\n')
    assert mp.checks[0].metric == Metric("coverage", ">=", 0.9) and mp.steps[0].metric is None
    with pytest.raises(InvalidMPError) as bad:
        parse_mp(b'# MP-1.2\n\n## Validate\n\n```bash metric="coverage is high"\necho 1\n```\n')
    assert bad.value.line == 5 and 'metric="coverage >= 0.90"' in bad.value.fix
    with pytest.raises(InvalidMPError) as step:
        parse_mp(b'# MP-1.3\n\n```bash metric="coverage >= 0.9"\necho 1\n```\n')
    assert "is a step, not a check" in str(step.value) and "Validate heading" in step.value.fix
