"""What a check's output must and must not say (inbox/expect.py): the fence attributes,
refused with their fix when malformed, and the search of an output of any size."""

from __future__ import annotations

import pytest

from mp_engine.core.errors import InvalidMPError
from mp_engine.inbox import expect
from mp_engine.inbox.expect import Expect, parse, scan
from mp_engine.inbox.metric import Metric
from mp_engine.inbox.mpfile import parse as parse_mp


def test_the_fence_attributes_name_texts_the_output_must_and_must_not_contain():
    assert parse('stdout_contains="3 passed"') == Expect(("3 passed",), ())
    assert parse("stdout_not_contains='Traceback' stdout_contains=\"ok\" stdout_contains='done'") == Expect(
        ("ok", "done"), ("Traceback",)
    )
    assert parse("") is None and parse('metric="x >= 1"') is None
    for bad in ("stdout_contains=ok", 'stdout_contains=""', "stdout_not_contains = ''", "stdout_not_contains=x"):
        with pytest.raises(ValueError, match='stdout_contains="TEXT"'):
            parse(bad)
    said = str(Expect(("ok",), ("FAIL",)))
    assert said == "its output must contain 'ok' and not contain 'FAIL'"


def test_a_text_is_found_across_the_chunks_the_output_is_read_in(tmp_path, monkeypatch):
    monkeypatch.setattr(expect, "CHUNK", 8)
    out = tmp_path / "check.stdout"
    out.write_text("collected 12 items\n12 passed in 0.3s\n")
    assert scan(out, ("12 passed", "items\n12", "failed")) == {"12 passed", "items\n12"}
    assert scan(tmp_path / "missing.stdout", ("x",)) == set() and scan(out, ()) == set()
    verdict = Expect(("passed",), ("items",)).verdict(out)
    assert verdict["missing"] == [] and verdict["unwanted"] == ["items"] and verdict["met"] is False


def test_a_check_s_expectations_are_parsed_beside_its_metric_and_a_step_s_are_refused():
    mp = parse_mp(
        b"# MP-1.1\n\n## Validate\n\n"
        b'```bash metric="coverage >= 0.9" stdout_contains="metric=1" stdout_not_contains="ERROR"\necho 1\n```\n'
    )
    (check,) = mp.checks
    assert check.metric == Metric("coverage", ">=", 0.9)  # the `metric=` inside a text is not read as one
    assert check.expect == Expect(("metric=1",), ("ERROR",))
    with pytest.raises(InvalidMPError) as bad:
        parse_mp(b"# MP-1.2\n\n## Validate\n\n```bash stdout_contains=ok\necho ok\n```\n")
    assert bad.value.line == 5 and "not quoted" in str(bad.value) and "Correct the fence at line 5" in bad.value.fix
    with pytest.raises(InvalidMPError) as step:
        parse_mp(b'# MP-1.3\n\n```bash stdout_contains="ok"\necho ok\n```\n')
    assert "is a step, not a check" in str(step.value) and "Validate heading" in step.value.fix
