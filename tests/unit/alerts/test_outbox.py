"""Undelivered alerts on disk (mp_engine/alerts/outbox.py): what was added and not done
survives a restart; the file goes when nothing is pending."""

from mp_engine.alerts.outbox import Outbox
from mp_engine.alerts.rules import Alert


def alert(n: int) -> Alert:
    return Alert("halt", f"t{n}", "b", "act", f"MP-1.{n}", {"event": "halted"})


def test_pending_alerts_survive_in_order_and_the_file_goes_when_all_are_done(tmp_path):
    box = Outbox(tmp_path / "alerts.jsonl")
    a, b = box.add(alert(1)), box.add(alert(2))
    assert a.id and a.id != b.id
    again = Outbox(tmp_path / "alerts.jsonl")  # a new engine
    assert [x.title for x in again.pending()] == ["t1", "t2"]
    again.done(a)
    assert [x.id for x in Outbox(tmp_path / "alerts.jsonl").pending()] == [b.id]
    again.done(b)
    assert not (tmp_path / "alerts.jsonl").exists() and again.pending() == []


def test_a_line_cut_short_by_a_crash_is_skipped(tmp_path):
    box = Outbox(tmp_path / "alerts.jsonl")
    box.add(alert(1))
    with (tmp_path / "alerts.jsonl").open("a") as f:
        f.write('{"add": {"kind": "ha')
    assert [x.title for x in box.pending()] == ["t1"]
