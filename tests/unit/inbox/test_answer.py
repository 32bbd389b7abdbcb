"""Answer files (mp_engine/inbox/answer.py): `Answers: MP-ID` (and `MT:`) above a blank
line, the answer below; what is no answer says why."""

import pytest

from mp_engine.inbox.answer import NotAnAnswer, parse, pending, render, write_host


def test_an_answer_names_the_mp_and_maybe_the_task_then_says_it():
    a = parse(b"Answers: MP-2.1\nMT: MT-002\n\nUse PostgreSQL.\nIt is on db.internal.\n", "inbox")
    assert (a.mp_id, a.mt, a.text) == ("MP-2.1", "MT-002", "Use PostgreSQL.\nIt is on db.internal.")
    titled = parse(b"# MP-2.9 The answer\nAnswers: MP-2.1\n\nYes.\n", "inbox")  # an MP-style title is fine
    assert titled.mp_id == "MP-2.1" and titled.mt is None
    assert parse(render("MP-2.1", "Yes.", "MT-003").encode(), "x").mt == "MT-003"


@pytest.mark.parametrize(
    "data,why",
    [
        (b"Use PostgreSQL.\n", "names no MP"),
        (b"Answers: nope\n\nYes.\n", "names no MP"),
        (b"Answers: MP-2.1\nMT: 2\n\nYes.\n", "not a micro-task id"),
        (b"Answers: MP-2.1\n\n   \n", "has no answer"),
    ],
)
def test_what_is_no_answer_says_why(data, why):
    with pytest.raises(NotAnAnswer, match=why):
        parse(data, "inbox")


def test_the_hosts_answer_comes_first(ws):
    (ws.inbox_dir / "answer.txt").write_text(render("MP-1.1", "from the orchestrator"))
    write_host(ws, "MP-1.2", "from the host")
    first = pending(ws)
    assert first.source == "host" and first.mp_id == "MP-1.2"
