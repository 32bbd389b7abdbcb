"""Classifying an agent call: usage limits (with their reset time), outages, auth, crashes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mp_engine.agent.invoke import classify, parse_reset
from mp_engine.errors import ProcessError
from mp_engine.execute.process import ProcessResult

NOW = datetime(2026, 3, 1, 10, 30, tzinfo=UTC)


def res(code: int | None = 1, **kw) -> ProcessResult:
    return ProcessResult(exit_code=code, signal=kw.pop("signal", None), duration=1.0, pid=1, **kw)


def kind(text: str, code: int | None = 1, status_seen: bool = False, **kw):
    return classify(res(code, **kw), text, status_seen=status_seen, now=NOW, fallback_wait=600)


def test_claude_usage_limit_with_an_epoch_reset():
    call = kind("Claude AI usage limit reached|1772362800")
    assert call.kind == "usage_limit" and call.resume_at == "2026-03-01T11:00:00Z"


def test_reset_times_in_the_forms_clis_print():
    assert parse_reset("You've hit your usage limit. Try again in 2 hours 5 minutes.", NOW) == NOW + timedelta(
        seconds=7500
    )
    assert parse_reset("5-hour limit reached ∙ resets 3pm (UTC)", NOW) == datetime(2026, 3, 1, 15, 0, tzinfo=UTC)
    assert parse_reset("limit reached, resets 9am (UTC)", NOW) == datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    assert parse_reset("quota exceeded until 2026-03-01T12:15:00Z", NOW) == datetime(2026, 3, 1, 12, 15, tzinfo=UTC)
    assert parse_reset("rate limit: retry after 30 seconds", NOW) == NOW + timedelta(seconds=30)
    assert parse_reset("usage limit reached", NOW) is None


def test_a_usage_limit_without_a_reset_waits_the_configured_time():
    call = kind("Error: 429 Too Many Requests")
    assert call.kind == "usage_limit" and call.resume_at == "2026-03-01T10:40:00Z"


def test_exit_zero_with_a_limit_notice_and_no_status_block_is_a_usage_limit_too():
    assert kind("usage limit reached, resets 3pm (UTC)", code=0).kind == "usage_limit"
    # ...but an answer with a status block that merely talks about rate limits is not.
    assert kind("I added a rate limit to the API", code=0, status_seen=True).kind == "ok"


def test_auth_outage_crash_timeout_and_not_found():
    assert kind("Invalid API key · Please run /login").kind == "auth"
    assert kind('API Error: 529 {"type":"overloaded_error"}').kind == "transient"
    assert kind("Traceback: KeyError", code=2).detail == "exit code 2"
    assert kind("", code=None, signal=9).detail == "killed by signal 9"
    assert kind("sh: 1: claude: not found", code=127).kind == "not_found"
    idle = kind("thinking...", code=None, signal=15, idle_timed_out=True)
    assert idle.kind == "timeout" and "no output" in idle.detail
    assert kind("", code=None, signal=15, interrupted=True).kind == "interrupted"
    missing = classify(ProcessError("could not start 'x'"), "", status_seen=False, now=NOW, fallback_wait=1)
    assert missing.kind == "not_found"
