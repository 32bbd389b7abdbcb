"""The CLIs' structured output (recorded from the real claude 2.1.197 and codex 0.169.0
against the fake APIs in tests/conformance/): the answer, the failure's HTTP status and
message, a limit's reset time."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from mp_engine.agent.call.classify import classify
from mp_engine.agent.call.structured import parse
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


def codex(*events: dict) -> str:
    started = [{"type": "thread.started", "thread_id": "01a2"}, {"type": "turn.started"}]
    return "\n".join(json.dumps(e) for e in [*started, *events]) + "\n"


def test_codex_json_lines_give_the_agents_messages_as_its_answer():
    out = codex(
        {"type": "item.completed", "item": {"id": "item_0", "type": "error", "message": "Model metadata not found"}},
        {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution", "command": "sh gen.sh"}},
        {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": "Ran it."}},
        {"type": "item.completed", "item": {"id": "item_3", "type": "agent_message", "text": BLOCK}},
        {"type": "turn.completed", "usage": {"input_tokens": 20, "output_tokens": 10}},
    )
    shaped = parse(out)
    assert shaped == parse(out) and shaped.answer == "Ran it.\n" + BLOCK
    assert not shaped.is_error and shaped.error == "" and shaped.api_status is None


def test_codex_failures_give_the_clis_message_and_the_status_it_names():
    def failed(message: str):
        return parse(
            codex({"type": "error", "message": message}, {"type": "turn.failed", "error": {"message": message}})
        )

    auth = failed("unexpected status 401 Unauthorized: Incorrect API key provided: sk-x, url: http://127.0.0.1:1/v1")
    assert auth.is_error and auth.api_status == 401 and auth.error.startswith("unexpected status 401")
    rate = failed("exceeded retry limit, last status: 429 Too Many Requests")
    assert rate.api_status == 429
    usage = failed(
        "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), try again at 6:06 PM."
    )
    assert usage.is_error and usage.api_status is None and "usage limit" in usage.error
    # codex prints the host's local time: 6:06 PM there, today or tomorrow, waited to its end.
    local = NOW.astimezone().replace(hour=18, minute=7)  # the end of the stated minute
    local += timedelta(days=1) if local <= NOW - timedelta(minutes=15) else timedelta(0)
    expected = local.astimezone(UTC).isoformat().replace("+00:00", "Z")
    assert classify_shaped(usage.error, usage.api_status).resume_at == expected
    outage = failed("We’re currently experiencing high demand, which may cause temporary errors.")
    assert classify_shaped(outage.error, outage.api_status).kind == "transient"


def test_a_codex_limit_event_with_reset_fields_is_read_from_them():
    """Later codex versions may put `resets_at`/`resets_in_seconds` on the error: used first."""
    out = codex({"type": "turn.failed", "error": {"message": "usage limit", "resets_in_seconds": 600}})
    assert parse(out, now=NOW).resets_at == "2026-11-25T13:10:00Z"
    out = codex({"type": "turn.failed", "error": {"message": "usage limit", "resets_at": 1795604400}})
    assert parse(out).resets_at == "2026-11-25T11:00:00Z"


def test_an_answer_that_talks_about_limits_is_no_limit():
    """What the agent said is never read for limits; only the CLI's own error is."""
    out = codex({"type": "item.completed", "item": {"id": "i", "type": "agent_message", "text": "HTTP 429 rate limit"}})
    shaped = parse(out + json.dumps({"type": "turn.completed", "usage": {}}))
    assert shaped.error == "" and "429" in shaped.answer
    assert parse(result(result="I fixed the 429 rate limit handling")).error == ""


def test_what_a_call_cost_comes_from_the_clis_own_fields():
    import json

    from mp_engine.agent.call.structured import parse, text_usage

    claude = {
        "type": "result",
        "result": "done",
        "total_cost_usd": 0.0123,
        "usage": {
            "input_tokens": 100,
            "output_tokens": 20,
            "cache_read_input_tokens": 7,
            "cache_creation_input_tokens": 3,
        },
    }
    assert parse(json.dumps(claude)).usage == {
        "input": 100,
        "output": 20,
        "cache_read": 7,
        "cache_write": 3,
        "cost_usd": 0.0123,
    }
    codex = [
        {"type": "thread.started"},
        {"type": "turn.completed", "usage": {"input_tokens": 100, "cached_input_tokens": 40, "output_tokens": 20}},
        {"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 2}},
    ]
    got = parse("\n".join(json.dumps(o) for o in codex)).usage
    assert got == {"input": 110, "output": 22, "cache_read": 40, "cache_write": 0, "cost_usd": None}
    aider = (
        "Tokens: 2.3k sent, 120 received. Cost: $0.01 message, $0.01 session.\n"
        "Tokens: 12k sent, 1.1k cache write, 500 cache hit, 80 received.\nCost: $0.0050 message, $0.02 session.\n"
    )
    assert text_usage(aider) == {
        "input": 14300,
        "output": 200,
        "cache_read": 500,
        "cache_write": 1100,
        "cost_usd": 0.015,
    }
    assert text_usage("Tokens: 900 sent, 12 received.")["cost_usd"] is None  # a model without a price
    assert text_usage("no usage here") is None and parse(json.dumps({"type": "result", "result": "x"})).usage is None


def test_every_command_failing_outside_the_task_is_environmental():
    """Issue #34: codex's command items that all fail with the sandbox helper's error."""

    def item(out: str, code: int | None) -> str:
        return json.dumps(
            {
                "type": "item.completed",
                "item": {"type": "command_execution", "command": "ls", "aggregated_output": out, "exit_code": code},
            }
        )

    def environment(*items: str) -> str | None:
        return parse("\n".join([json.dumps({"type": "thread.started"}), *items])).environment

    bwrap = "bwrap: execvp codex-linux-sandbox: No such file or directory\n"
    assert environment(item(bwrap, 1), item("x\n" + bwrap, 1)) == bwrap.strip()
    assert environment(item(bwrap, 1), item("ok\n", 0)) is None  # one ran: the host works
    assert environment(item("FAILED test_x\n", 1)) is None  # the task's failure, not the host's
    assert parse("no json at all\nbwrap: nope") is None  # not codex's output: nothing is read from it
