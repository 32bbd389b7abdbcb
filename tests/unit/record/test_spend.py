"""The engine's spend log (mp_engine/record/spend.py, issue #42): days and months on the
configured calendar, a call charged once by its key, every reader following the one file,
a torn line skipped, alerts once per period, and the file kept to the current month."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from mp_engine.record.spend import COMPACT_AFTER, SpendLog, periods, summary, zone


def epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_days_and_months_follow_the_configured_calendar():
    day, month = periods(epoch("2026-03-31T23:30:00+00:00"), UTC)
    assert (day.key, month.key) == ("2026-03-31", "2026-03")
    assert day.resets_at == "2026-04-01T00:00:00Z" and month.resets_at == "2026-04-01T00:00:00Z"
    berlin = zone("Europe/Berlin")
    day, month = periods(epoch("2026-03-31T23:30:00+00:00"), berlin)  # 01:30 on April 1st there
    assert (day.key, month.key) == ("2026-04-01", "2026-04") and day.resets_at == "2026-04-01T22:00:00Z"
    day, _ = periods(epoch("2026-03-29T12:00:00+00:00"), berlin)  # the day clocks go forward: 23 hours
    assert day.ends - day.starts == 23 * 3600
    _, december = periods(epoch("2026-12-15T00:00:00+00:00"), UTC)
    assert december.resets_at == "2027-01-01T00:00:00Z"


def test_a_call_is_charged_once_and_every_reader_sees_it(tmp_path):
    path = tmp_path / "agent_spend.log"
    engine, status = SpendLog(path, "UTC"), SpendLog(path, "UTC")
    now = epoch("2026-04-05T10:00:00+00:00")
    assert engine.charge("run/k1", 0.25, mp="MP-1", at=now)
    assert not engine.charge("run/k1", 0.25, mp="MP-1", at=now)  # replayed after a crash
    assert SpendLog(path, "UTC").charge("run/k2", 0.5, mp="MP-2", at=now + 60)  # another run, same file
    assert engine.spent(now + 120)["day"][1] == 0.75 and status.spent(now + 120)["month"][1] == 0.75
    assert engine.spent(epoch("2026-04-06T00:00:01+00:00"))["day"][1] == 0.0  # a new day
    assert engine.spent(epoch("2026-04-06T00:00:01+00:00"))["month"][1] == 0.75


def test_a_line_torn_by_a_crash_waits_for_its_end_and_junk_is_skipped(tmp_path):
    path = tmp_path / "agent_spend.log"
    now = epoch("2026-04-05T10:00:00+00:00")
    log = SpendLog(path, "UTC")
    log.charge("a", 1.0, mp="MP-1", at=now)
    with path.open("a") as f:
        f.write("not json\n" + json.dumps({"at": now, "usd": 2.0, "key": "b"})[:20])
    assert log.spent(now)["day"][1] == 1.0
    with path.open("a") as f:
        f.write("\n")  # the torn line's end: still not a charge
    assert log.spent(now)["day"][1] == 1.0 and SpendLog(path, "UTC").spent(now)["day"][1] == 1.0


def test_an_alert_goes_out_once_per_period_across_restarts(tmp_path):
    path = tmp_path / "agent_spend.log"
    now = epoch("2026-04-05T10:00:00+00:00")
    day, _ = periods(now, UTC)
    assert SpendLog(path, "UTC").alert_once(day, now)
    assert not SpendLog(path, "UTC").alert_once(day, now + 5)
    tomorrow, _ = periods(now + 86400, UTC)
    assert SpendLog(path, "UTC").alert_once(tomorrow, now + 86400)


def test_the_file_keeps_the_current_month_once_older_lines_pile_up(tmp_path):
    path = tmp_path / "agent_spend.log"
    march = epoch("2026-03-10T10:00:00+00:00")
    path.write_text(
        "".join(json.dumps({"at": march + i, "usd": 0.001, "key": f"m{i}"}) + "\n" for i in range(COMPACT_AFTER))
    )
    log = SpendLog(path, "UTC")
    april = epoch("2026-04-02T10:00:00+00:00")
    assert log.spent(april)["month"][1] == 0.0 and log.spent(march)["month"][1] == 2.0
    log.charge("a1", 0.5, mp="MP-1", at=april)
    assert len(path.read_text().splitlines()) == 1 and log.spent(april)["month"][1] == 0.5
    assert SpendLog(path, "UTC").spent(april)["month"][1] == 0.5


def test_the_summary_says_spent_left_and_the_reset(tmp_path):
    log = SpendLog(tmp_path / "agent_spend.log", "UTC")
    now = epoch("2026-04-05T10:00:00+00:00")
    log.charge("a", 3.0, mp="MP-1", at=now)
    got = summary(log, {"day": 2.0, "month": None}, now)
    assert got["day"] == {
        "key": "2026-04-05",
        "spent_usd": 3.0,
        "limit_usd": 2.0,
        "left_usd": 0.0,
        "resets_at": "2026-04-06T00:00:00Z",
    }
    assert got["month"]["left_usd"] is None and got["month"]["spent_usd"] == 3.0


def test_the_days_of_the_current_month_are_what_the_dashboard_plots(tmp_path):
    log = SpendLog(tmp_path / "agent_spend.log", "UTC")
    log.charge("a", 0.5, mp="MP-1", at=epoch("2026-03-31T12:00:00+00:00"))  # last month: not plotted
    log.charge("b", 1.0, mp="MP-1", at=epoch("2026-04-02T09:00:00+00:00"))
    log.charge("c", 0.25, mp="MP-2", at=epoch("2026-04-02T18:00:00+00:00"))
    log.charge("d", 2.0, mp="MP-3", at=epoch("2026-04-05T08:00:00+00:00"))
    assert log.days(epoch("2026-04-05T10:00:00+00:00")) == [("2026-04-02", 1.25), ("2026-04-05", 2.0)]
    assert log.days(epoch("2026-05-01T00:00:01+00:00")) == []  # a new month starts empty
