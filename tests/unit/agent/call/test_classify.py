"""Classifying an agent call: usage limits (with their reset time), outages, auth, crashes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mp_engine.agent.call.classify import classify, parse_reset
from mp_engine.agent.call.network import Network
from mp_engine.core.errors import ProcessError
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
    assert parse_reset("5-hour limit reached ∙ resets 3pm (UTC)", NOW) == datetime(2026, 3, 1, 15, 1, tzinfo=UTC)
    assert parse_reset("limit reached, resets 9am (UTC)", NOW) == datetime(2026, 3, 2, 9, 1, tzinfo=UTC)
    assert parse_reset("quota exceeded until 2026-03-01T12:15:00Z", NOW) == datetime(2026, 3, 1, 12, 15, tzinfo=UTC)
    assert parse_reset("rate limit: retry after 30 seconds", NOW) == NOW + timedelta(seconds=30)
    assert parse_reset("usage limit reached", NOW) is None


def test_a_usage_limit_without_a_reset_waits_the_configured_time():
    call = kind("Error: 429 Too Many Requests")
    assert call.kind == "usage_limit" and call.resume_at == "2026-03-01T10:40:00Z"


def test_a_plain_rate_limit_waits_a_minute_and_a_quota_the_usage_wait():
    """claude's words for a 429 (recorded from the real CLI, tests/conformance/): a
    per-minute rate limit is a minute away, not half an hour; a quota or a plan limit is
    hours away."""
    claude_429 = "API Error: Request rejected (429) · Number of request tokens has exceeded your per-minute rate limit"

    def wait(text: str) -> str | None:
        return classify(res(1), text, status_seen=False, now=NOW, fallback_wait=1800, rate_wait=60).resume_at

    assert wait(claude_429) == "2026-03-01T10:31:00Z"
    assert wait("Error: 429 Too Many Requests") == "2026-03-01T10:31:00Z"
    assert wait("You've hit your usage limit") == "2026-03-01T11:00:00Z"
    assert wait("You've hit your weekly limit") == "2026-03-01T11:00:00Z"
    # aider's notice after any rate limit ("...or check your quotas") is not a quota.
    aider = "litellm.RateLimitError: OpenAIException - Rate limit reached\nThe API provider has rate limited you. Try again later or check your quotas."
    assert wait(aider) == "2026-03-01T10:31:00Z"


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


def test_claudes_subscription_limits_are_usage_limits_with_their_reset():
    """Claude Code 2.x on a subscription: session, weekly and Opus limits, exit 1."""
    for text, when in (
        ("You've hit your session limit · resets 8:10pm (UTC)", datetime(2026, 3, 1, 20, 11, tzinfo=UTC)),
        ("You've hit your weekly limit · resets Mar 4, 8pm (UTC)", datetime(2026, 3, 4, 20, 1, tzinfo=UTC)),
        ("You've hit your Opus limit · resets Mar 2, 9am (UTC)", datetime(2026, 3, 2, 9, 1, tzinfo=UTC)),
    ):
        call = kind(text)
        assert call.kind == "usage_limit", text
        assert call.resume_at == when.isoformat().replace("+00:00", "Z"), text


def test_codex_resets_are_never_in_the_past_and_never_a_day_late():
    """A time stated to the minute is waited to the end of that minute (codex cuts its
    exact reset to the minute, so its start can be before the reset)."""
    # "try again at 10:30 AM" said at 10:30:40 means by the end of that minute, not
    # tomorrow at 10:30 (nor now: the retry would meet the limit again).
    now = NOW + timedelta(seconds=40)
    assert parse_reset("You've hit your usage limit. Try again at 10:30 AM.", now.astimezone(UTC)) is not None
    at = parse_reset("You've hit your usage limit (UTC). Try again at 10:30 AM (UTC).", now)
    assert at == datetime(2026, 3, 1, 10, 31, tzinfo=UTC)
    # Ten minutes behind (a skewed clock): now.
    assert parse_reset("Try again at 10:20 AM (UTC).", now) == now
    # A clock time well behind now is tomorrow's.
    assert parse_reset("try again at 9:00 AM (UTC)", NOW) == datetime(2026, 3, 2, 9, 1, tzinfo=UTC)
    # Another day, with the year: parsed as stated (in the stated zone), not "about 28 h early".
    assert parse_reset("Try again at Mar 3rd, 2026 12:10 AM (UTC).", NOW) == datetime(2026, 3, 3, 0, 11, tzinfo=UTC)
    assert parse_reset("try again at Mar 3rd, 2026 12:10 AM (Europe/Berlin)", NOW) == datetime(
        2026, 3, 2, 23, 11, tzinfo=UTC
    )
    # A stated day that has passed (no year) is next year's; with a past year, now.
    assert parse_reset("resets Feb 2, 8am (UTC)", NOW) == datetime(2027, 2, 2, 8, 1, tzinfo=UTC)
    assert parse_reset("try again at Feb 2nd, 2026 8:00 AM (UTC)", NOW) == NOW


def test_aider_exits_zero_after_an_api_error_and_is_still_read():
    assert kind("litellm.AuthenticationError: AnthropicException - invalid x-api-key", code=0).kind == "auth"
    assert kind("litellm.InternalServerError: 503 Service Unavailable", code=0).kind == "transient"
    # A real answer (a status block) that mentions a 401 is an answer.
    assert kind("handled the 401 case in login()", code=0, status_seen=True).kind == "ok"


def test_a_prompt_too_long_for_argv_is_a_configuration_error_not_a_missing_cli():
    import errno

    from mp_engine.agent.call.invoke import argv_problem

    assert argv_problem(["claude", "-p", "x" * 200_000], {}) is not None
    assert argv_problem(["claude", "-p", "short"], {"A": "b"}) is None
    e2big = ProcessError("could not start 'claude': Argument list too long")
    e2big.__cause__ = OSError(errno.E2BIG, "Argument list too long")
    call = classify(e2big, "", status_seen=False, now=NOW, fallback_wait=1)
    assert call.kind == "config" and "too long" in call.detail


def test_no_credit_left_is_billing_not_a_wait():
    """A pay-as-you-go account without credit recovers only when someone pays: claude's
    "Credit balance is too low" (recorded from the real CLI), OpenAI's insufficient_quota,
    and the same from aider (exit 0). A notice that gives a reset is a limit to wait for."""
    for text, code in (
        ("Credit balance is too low", 1),
        ("insufficient_quota: You exceeded your current quota, please check your plan and billing details.", 1),
        ("litellm.RateLimitError: OpenAIException - You exceeded your current quota", 0),
        ("Quota exceeded. Check your plan and billing details.", 1),  # codex 0.169.0
    ):
        assert kind(text, code=code).kind == "billing", text
    codex = "You've hit your usage limit. Visit settings to purchase more credits or try again at 6:06 PM."
    assert kind(codex).kind == "usage_limit"


def test_a_wrapped_provider_message_is_quoted_whole():
    """Issue #34: aider wraps the provider's message over lines; the diagnosis quotes all of
    it, not only the line that matched."""
    text = (
        "Tokens: 1.2k sent\n\n"
        "litellm.RateLimitError: RateLimitError: OpenAIException - You exceeded your current\n"
        "quota, please check your plan and billing details. For more information on this\n"
        "error, read the docs.\n\nAider is done.\n"
    )
    call = kind(text, code=0)
    assert call.kind == "billing"
    assert call.detail == (
        "litellm.RateLimitError: RateLimitError: OpenAIException - You exceeded your current quota, please check "
        "your plan and billing details. For more information on this error, read the docs."
    )


# What the real CLIs print when a connection fails inside the sandbox (recorded with claude
# 2.1.197, codex 0.169.0 and aider 0.86.2, issue #44): none names the host.
CLAUDE_REFUSED = "API Error: Unable to connect to API (ConnectionRefused)"
CODEX_WAITING = "Reconnecting... waiting for network (Connection failed: error sending request)"
AIDER_REFUSED = "\n".join(
    [
        "HTTPSConnectionPool(host='raw.githubusercontent.com', port=443): Max retries exceeded with url: "
        '/BerriAI/litellm/main/model_prices_and_context_window.json (Caused by NameResolutionError("HTTPSConnection('
        "host='raw.githubusercontent.com', port=443): Failed to resolve 'raw.githubusercontent.com' ([Errno -3] "
        'Temporary failure in name resolution)"))',
        "Aider v0.86.2",
        "litellm.InternalServerError: InternalServerError: OpenAIException - Connection ",  # aider wraps here
        "error.",
        "The API provider's servers are down or overloaded.",
    ]
)
BOXED = Network(("api.anthropic.com:443",))


def boxed(text: str, code: int | None = 1, network: Network | None = BOXED, **kw):
    return classify(res(code, **kw), text, status_seen=False, now=NOW, fallback_wait=600, network=network)


@pytest.mark.parametrize(
    "text, code", [(CLAUDE_REFUSED, 1), (CODEX_WAITING, None), (AIDER_REFUSED, 0)], ids=["claude", "codex", "aider"]
)
def test_in_the_sandbox_a_connection_that_failed_is_unreachable_not_a_crash(text, code):
    """issue #44: claude's refused connection was a crash and escalated to the hard gate;
    aider's an outage retried for minutes. In the sandbox it is the sandbox's refusal: the
    call ends the run with the allowed hosts said, and the fix."""
    call = boxed(text, code, gave_up=code is None)
    assert call.kind == "unreachable" and call.ends_run and call.host is None, call
    assert "which allows only api.anthropic.com:443" in call.detail and "did not say to which host" in call.detail
    assert "raw.githubusercontent.com" not in call.detail  # litellm's price list is not the call's failure


def test_the_host_is_named_from_the_error_or_from_what_the_workspace_says():
    assert boxed("connect ECONNREFUSED 127.0.0.1:4000").host == "127.0.0.1:4000"
    assert boxed("getaddrinfo ENOTFOUND gw.corp").host == "gw.corp"
    assert boxed("error sending request for url (https://gw.corp/v1/responses)").host == "gw.corp:443"
    named = Network(("api.anthropic.com:443",), named=(("evil.example:443", "ANTHROPIC_BASE_URL in .claude/x"),))
    call = boxed(CLAUDE_REFUSED, network=named)
    assert (
        call.host == "evil.example:443"
        and "ANTHROPIC_BASE_URL in .claude/x points it at evil.example:443" in call.detail
    )
    # An allowed host in the error is not the one refused.
    assert boxed("connect ECONNREFUSED api.anthropic.com:443").host is None


def test_an_allowed_endpoint_the_engine_cannot_reach_either_is_an_outage_naming_it():
    refused = (("gw:8080", "[Errno 111] Connection refused"),)
    down = Network(
        ("api.anthropic.com:443", "gw:8080"), configured=(("gw:8080", "ANTHROPIC_BASE_URL"),), refused=refused
    )
    call = boxed(CLAUDE_REFUSED, network=down)
    assert call.kind == "transient" and call.host == "gw:8080", call
    assert "could not reach gw:8080 ([Errno 111] Connection refused; set by ANTHROPIC_BASE_URL)" in call.detail
    # A side host the relay could not reach is not the call's endpoint: the sandbox refused it.
    side = Network(
        ("api.anthropic.com:443", "gw:8080"),
        configured=(("gw:8080", "X"),),
        refused=(("api.anthropic.com:443", "no DNS"),),
    )
    assert boxed(CLAUDE_REFUSED, network=side).kind == "unreachable"
    # The relay joined it to its API: what failed after that (a provider that resets) is no
    # refusal of the sandbox's, but an outage as outside it.
    joined = Network(("api.anthropic.com:443",), joined=("api.anthropic.com:443",))
    assert boxed(CLAUDE_REFUSED, network=joined).kind == "transient"
    assert boxed("connect ECONNREFUSED 10.1.1.1:4000", network=joined).host == "10.1.1.1:4000"  # named: refused
    assert (
        boxed(
            CLAUDE_REFUSED,
            network=Network(
                ("api.anthropic.com:443", "gw:80"), configured=(("gw:80", "X"),), joined=("api.anthropic.com:443",)
            ),
        ).kind
        == "unreachable"
    )  # a side host only


def test_the_rule_holds_only_in_the_sandbox_and_only_for_a_call_that_did_not_answer():
    assert boxed(CLAUDE_REFUSED, network=None).kind == "transient"  # outside: the provider, as before
    assert boxed(AIDER_REFUSED, code=0, network=None).kind == "transient"
    ok = classify(res(0), AIDER_REFUSED, status_seen=True, now=NOW, fallback_wait=600, network=BOXED)
    assert ok.kind == "ok"  # it answered: the noise of a refused background host is nothing
    assert boxed("Invalid API key\n" + AIDER_REFUSED.splitlines()[0]).kind == "auth"
    api = classify(res(1), CLAUDE_REFUSED, status_seen=False, now=NOW, fallback_wait=600, network=BOXED, api_status=500)
    assert api.kind == "transient"  # an API answered: it was reached
    assert boxed("Traceback: KeyError", code=2).kind == "crash"


# claude 2.1.197's own report, recorded against the scripted model server (a model that keeps
# calling tools) with `--max-turns 3` (issue #42): exit 1, `error_max_turns`.
CLAUDE_AT_LIMIT = (
    '{"type":"result","subtype":"error_max_turns","duration_ms":1268,"duration_api_ms":448,"is_error":true,'
    '"num_turns":4,"stop_reason":"tool_use","session_id":"da67a6b3-3c70-4ef6-b768-2c14be91ac8b","total_cost_usd":0.003,'
    '"usage":{"input_tokens":300,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":60},'
    '"permission_denials":[],"terminal_reason":"max_turns","errors":["Reached maximum number of turns (3)"]}'
)
# claude-code-action #1577: `--max-turns 60`, 73 turns, reported as success.
CLAUDE_PAST_LIMIT = (
    '{"type":"result","subtype":"success","is_error":false,"num_turns":73,"result":"All done.",'
    '"total_cost_usd":1.2,"usage":{"input_tokens":1000,"output_tokens":100}}'
)


def turns_kind(stdout: str, code: int, max_turns: int | None):
    from mp_engine.agent.call.structured import parse

    shaped = parse(stdout)
    assert shaped is not None
    return classify(
        res(code),
        shaped.error,
        status_seen=True,
        now=NOW,
        fallback_wait=600,
        api_status=shaped.api_status if shaped.is_error else None,
        turns=shaped.turns,
        max_turns=max_turns,
        turn_limit=shaped.turn_limit,
    )


def test_a_call_that_stopped_at_its_turn_limit_is_a_turn_limit_not_a_crash():
    call = turns_kind(CLAUDE_AT_LIMIT, 1, 3)
    assert call.kind == "turn_limit" and not call.pauses and not call.ends_run
    assert call.detail == "the CLI stopped at --max-turns 3 before the task was done (4 turns)"


def test_a_call_that_ran_past_its_turn_limit_is_never_success():
    call = turns_kind(CLAUDE_PAST_LIMIT, 0, 60)
    assert call.kind == "turn_limit" and "ran 73 turns, past --max-turns 60" in call.detail
    assert turns_kind(CLAUDE_PAST_LIMIT, 0, 80).kind == "ok"  # within its limit
    assert turns_kind(CLAUDE_PAST_LIMIT, 0, None).kind == "ok"  # no limit asked


def test_claude_s_plain_text_end_at_its_turn_limit():
    assert kind("Error: Reached max turns (2)", 1).kind == "turn_limit"
    assert kind("Reached max turns (2) is what I read in the docs", 0, status_seen=True).kind == "ok"
