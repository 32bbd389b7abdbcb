"""What the agent said, without its echo of the prompt (agent/echo.py)."""

from __future__ import annotations

from mp_engine.agent.call.echo import for_claims, for_limits
from mp_engine.agent.judge.claims import parse_claims
from mp_engine.agent.prompt.layout import protocol

NONCE = "n0nce-42"
PROMPT = "# Task\nAdd retries. The API answers HTTP 429 on rate limit.\n\n" + protocol(NONCE)
REAL = (
    "done\n---LOOPR_STATUS---\nNONCE: n0nce-42\nSTATUS: COMPLETE\nEXIT_SIGNAL: true\nWORK_TYPE: code\n"
    "FILES_MODIFIED: 1\nERRORS: 0\nSUMMARY: retries added\n---END_LOOPR_STATUS---\n"
    '<mt_complete nonce="n0nce-42">tests/test_api.py:10</mt_complete>\n'
)


def test_an_agent_that_echoes_its_prompt_is_read_by_what_it_answered():
    """codex exec prints the user prompt on stderr: its example claims carry the nonce."""
    echoed = "user\n" + PROMPT + "\ncodex\n" + REAL
    claims = parse_claims(for_claims(echoed, PROMPT), NONCE)
    assert claims.claimed_complete and not claims.blocked and claims.evidence == "tests/test_api.py:10"
    # The echo alone claims nothing (read raw, it is BLOCKED with "what you need").
    assert parse_claims("user\n" + PROMPT, NONCE).blocked
    alone = parse_claims(for_claims("user\n" + PROMPT, PROMPT), NONCE)
    assert not alone.blocked and not alone.claimed_complete


def test_an_echo_with_changed_line_breaks_still_loses_its_example_claims():
    wrapped = "> " + PROMPT.replace("\n", "\n> ")  # quoted, so not a verbatim copy
    claims = parse_claims(for_claims(wrapped.replace("> <", "<"), PROMPT), NONCE)
    assert not claims.blocked and not claims.claimed_complete


def test_limits_are_read_only_from_what_the_cli_itself_printed():
    said = "user\n" + PROMPT + "\nERROR: 401 Unauthorized: invalid api key\n"
    text = for_limits(said, PROMPT)
    assert "429" not in text and "rate limit" not in text and "401 Unauthorized" in text
    assert for_limits("anything", None) == "anything" and for_claims("x", "") == "x"


def test_an_echoed_drift_question_gives_no_verdict():
    """The reflector's prompt shows both verdicts with the nonce (`<drifted>` last): a CLI
    that echoes it, even reflowed, must not be read as finding drift."""
    from mp_engine.agent.judge.claims import parse_verdict

    question = f'Does it serve the goal?\n<aligned nonce="{NONCE}">why</aligned>\nor:\n<drifted nonce="{NONCE}">how</drifted>\n'
    wrapped = "> " + question.replace("\n", "\n> ")
    assert parse_verdict(question, NONCE)["verdict"] == "drifted"  # read raw, the echo is drift
    for echoed in ("user\n" + question, wrapped.replace("> <", "<")):
        assert parse_verdict(for_claims(echoed, question), NONCE)["verdict"] == "none"
    answer = f'<aligned nonce="{NONCE}">it adds the retries the goal asks for</aligned>'
    assert parse_verdict(for_claims("user\n" + question + answer, question), NONCE)["verdict"] == "aligned"
