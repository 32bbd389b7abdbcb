"""claude's structured output (recorded from the real CLI 2.1.197 against the fake API in
tests/conformance/): the answer, the failure's HTTP status, a limit's reset time."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from mp_engine.agent.invoke import classify
from mp_engine.agent.structured import parse
from mp_engine.execute.process import ProcessResult

NOW = datetime(2026, 11, 25, 13, 0, tzinfo=UTC)
BLOCK = "Done.\n\n---LOOPR_STATUS---\nNONCE: abc123abc123\nSTATUS: COMPLETE\n---END_LOOPR_STATUS---\n"


def result(**fields) -> str:
    base = {"type": "result", "subtype": "success", "is_error": False, "api_error_status": None, "result": ""}
    return json.dumps({**base, **fields})


def test_the_answer_of_json_output_is_the_result_text_with_real_newlines():
    shaped = parse(result(result=BLOCK))
    assert shaped is not None and shaped.answer == BLOCK and not shaped.is_error and shaped.api_status is None


def test_stream_json_is_read_to_its_result_line_and_a_rate_limit_event_gives_the_reset():
    lines = [
        json.dumps({"type": "system", "subtype": "init"}),
        json.dumps({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected", "resetsAt": 1795604400}}),
        result(is_error=True, api_error_status=429, result="API Error: Request rejected (429) · limit"),
    ]
    shaped = parse("\n".join(lines) + "\n")
    assert shaped.is_error and shaped.api_status == 429 and shaped.resets_at == "2026-11-25T11:00:00Z"


def test_other_output_is_not_structured():
    assert parse("Plain text\n" + BLOCK) is None
    assert parse('{"not": "a result"}') is None


def classify_shaped(text: str, status: int | None, resets_at: str | None = None):
    res = ProcessResult(exit_code=1, signal=None, duration=1.0, pid=1)
    return classify(
        res, text, status_seen=False, now=NOW, fallback_wait=1800, rate_wait=60, api_status=status, resets_at=resets_at
    )


def test_the_api_status_decides_before_any_pattern():
    assert classify_shaped("Invalid API key · Fix external API key", 401).kind == "auth"
    assert classify_shaped("something the patterns do not know", 403).kind == "auth"
    assert classify_shaped("API Error: Repeated 529 Overloaded errors", 529).kind == "transient"
    rate = classify_shaped("API Error: Request rejected (429) · per-minute rate limit", 429)
    assert rate.kind == "usage_limit" and rate.resume_at == "2026-11-25T13:01:00Z"
    told = classify_shaped("rejected", 429, resets_at="2026-11-25T15:30:00Z")
    assert told.kind == "usage_limit" and told.resume_at == "2026-11-25T15:30:00Z"
    assert classify_shaped("some crash", None).kind == "crash"
