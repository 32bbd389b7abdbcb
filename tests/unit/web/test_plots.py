"""History plots: one bar per run, scaled to the longest; one per agent level."""

from __future__ import annotations

from mp_engine.web.plots import durations, rates


def test_duration_bars_are_oldest_first_and_scaled_to_the_longest():
    runs = [
        {"mp_id": "MP-3", "status": "ERROR", "duration": 2.0},
        {"mp_id": "MP-2", "status": "COMPLETED", "duration": 4.0},
        {"mp_id": "MP-1", "status": "COMPLETED", "duration": None},
    ]
    p = durations(runs, width=100, height=114)
    assert [b["status"] for b in p["bars"]] == ["COMPLETED", "ERROR"]  # newest first in, oldest left out
    assert p["bars"][0]["h"] == 100 and p["bars"][1]["h"] == 50 and p["top"] == 4.0
    assert p["bars"][1]["x"] > p["bars"][0]["x"]
    assert durations([])["bars"] == []


def test_rate_bars_show_the_share_finished():
    p = rates(
        {"local": {"reached": 4, "finished": 1, "rate": 0.25}, "cloud": {"reached": 3, "finished": 3, "rate": 1.0}},
        width=200,
    )
    assert [(b["name"], b["w"]) for b in p["bars"]] == [("cloud", 200.0), ("local", 50.0)]
