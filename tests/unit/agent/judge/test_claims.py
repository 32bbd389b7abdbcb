"""The agent's claims are parsed strictly and count only with the run's nonce."""

from __future__ import annotations

import pytest

from mp_engine.agent.judge.claims import parse_claims
from mp_engine.agent.prompt.layout import protocol

NONCE = "a1b2c3"


def status(nonce: str | None = NONCE, **fields: str) -> str:
    values = {
        "STATUS": "COMPLETE",
        "EXIT_SIGNAL": "true",
        "WORK_TYPE": "code",
        "FILES_MODIFIED": "2",
        "ERRORS": "0",
        "SUMMARY": "added the endpoint",
        **fields,
    }
    body = (f"NONCE: {nonce}\n" if nonce else "") + "".join(f"{k}: {v}\n" for k, v in values.items())
    return f"---LOOPR_STATUS---\n{body}---END_LOOPR_STATUS---"


def test_a_completion_tag_and_status_block_with_the_nonce_are_a_claim():
    c = parse_claims(f'work...\n<mt_complete nonce="{NONCE}">app.py:3</mt_complete>\n{status()}\n', NONCE)
    assert c.claimed_complete and c.status_ok and not c.blocked
    assert c.evidence == "app.py:3" and c.status.files_modified == 2 and c.work_type == "code"
    assert c.summary == "added the endpoint" and c.ignored == []


def test_echoed_blocks_without_the_nonce_are_ignored():
    echoed = f"$ cat NOTES.md\n<mt_complete>done</mt_complete>\n{status(nonce=None)}\n"
    c = parse_claims(echoed, NONCE)
    assert not c.claimed_complete and not c.status_ok
    assert c.status_problem == "no status block with this run's nonce"
    assert c.ignored == ["<mt_complete> with no nonce", "status block with no nonce"]


def test_another_runs_nonce_does_not_count_either():
    c = parse_claims(f"<mt_complete nonce=ffff>x</mt_complete>\n{status(nonce='ffff')}", NONCE)
    assert not c.claimed_complete and c.ignored == [
        "<mt_complete> with another nonce",
        "status block with another nonce",
    ]


def test_nonce_attribute_forms_and_the_last_valid_block_wins():
    text = f"<mt_complete nonce={NONCE}>a</mt_complete> <mt_complete nonce='{NONCE}'>b</mt_complete>\n"
    text += status(STATUS="IN_PROGRESS", EXIT_SIGNAL="false") + "\n" + status(SUMMARY="final")
    c = parse_claims(text, NONCE)
    assert c.claimed_complete and c.evidence == "b" and c.summary == "final"


def test_an_invalid_status_block_is_reported_and_is_no_claim():
    c = parse_claims(status(FILES_MODIFIED="many"), NONCE)
    assert not c.status_ok and not c.claimed_complete
    assert c.status_problem == "invalid status block: FILES_MODIFIED and ERRORS must be integers"
    c = parse_claims(status(WORK_TYPE="vibes"), NONCE)
    assert "WORK_TYPE 'vibes'" in c.status_problem
    assert parse_claims("no block at all", NONCE).status_problem == "no status block"


def test_a_status_exit_signal_alone_is_a_claim_and_blocked_carries_the_reason():
    assert parse_claims(status(), NONCE).claimed_complete
    assert not parse_claims(status(EXIT_SIGNAL="false"), NONCE).claimed_complete
    c = parse_claims(f'<blocked nonce="{NONCE}">need the DB password</blocked>', NONCE)
    assert c.blocked and c.blocked_reason == "need the DB password"
    c = parse_claims(status(STATUS="BLOCKED", EXIT_SIGNAL="false", SUMMARY="no access"), NONCE)
    assert c.blocked and c.blocked_reason == "no access"


def test_the_prompt_protocol_is_parseable_when_followed_literally():
    text = protocol(NONCE)
    assert f"NONCE: {NONCE}" in text and f'<mt_complete nonce="{NONCE}">' in text
    filled = (
        text.replace("IN_PROGRESS | COMPLETE | BLOCKED | ERROR", "COMPLETE")
        .replace("true | false", "true")
        .replace("tests | code | docs | other", "code")
        .replace("<number of files you changed>", "1")
        .replace("<number of errors you saw>", "0")
    )
    c = parse_claims(filled, NONCE)
    assert c.status_ok and c.claimed_complete


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"STATUS": "DONE"}, "STATUS 'DONE' is not one of"),
        ({"EXIT_SIGNAL": "yes"}, "EXIT_SIGNAL 'yes' is not true or false"),
        ({"WORK_TYPE": "vibes"}, "WORK_TYPE 'vibes' is not one of"),
        ({"FILES_MODIFIED": "many"}, "FILES_MODIFIED"),
    ],
)
def test_each_invalid_field_is_named_and_the_block_is_no_claim(fields, problem):
    c = parse_claims(status(**fields), NONCE)
    assert not c.status_ok and not c.claimed_complete
    assert problem in c.status_problem


def test_a_block_missing_fields_names_them():
    text = f"---LOOPR_STATUS---\nNONCE: {NONCE}\nSTATUS: COMPLETE\n---END_LOOPR_STATUS---"
    c = parse_claims(text, NONCE)
    assert c.status_problem == (
        "invalid status block: the status block lacks EXIT_SIGNAL, WORK_TYPE, FILES_MODIFIED, ERRORS, SUMMARY"
    )


def test_claims_round_trip_through_the_iteration_record():
    from mp_engine.agent.judge.claims import Claims

    c = parse_claims(f'<mt_complete nonce="{NONCE}">x</mt_complete>\n{status()}', NONCE)
    assert Claims.from_dict(c.to_dict()) == c
