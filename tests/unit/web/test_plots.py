"""History plots: one bar per run, scaled to the longest; one per agent level."""

from __future__ import annotations

from mp_engine.web.plots import durations, label, rates, round_up, spend


def test_duration_bars_are_oldest_first_and_scaled_to_the_longest():
    runs = [
        {"mp_id": "MP-3", "status": "ERROR", "duration": 2.0},
        {"mp_id": "MP-2", "status": "COMPLETED", "duration": 4.0},
        {"mp_id": "MP-1", "status": "COMPLETED", "duration": None},
    ]
    p = durations(runs, width=164, height=128)  # a plot area of 100 x 100
    assert [b["status"] for b in p["bars"]] == ["COMPLETED", "ERROR"]  # newest first in, oldest left out
    assert p["bars"][0]["h"] == 80 and p["bars"][1]["h"] == 40 and p["top"] == 4.0  # on a scale to 5 s
    assert p["bars"][1]["x"] > p["bars"][0]["x"]
    assert durations([])["bars"] == []


def test_the_duration_plot_has_labelled_axes_and_short_runs_show():
    # issue #44: no axes, no labels, and runs under a second were bars of no height.
    runs = [
        {"mp_id": "MP-2", "status": "COMPLETED", "duration": 0.004, "finished_at": "2026-11-25T10:00:00Z"},
        {"mp_id": "MP-1", "status": "COMPLETED", "duration": 95.0, "finished_at": "2026-11-24T10:00:00Z"},
    ]
    p = durations(runs)
    assert [t["label"] for t in p["ticks"]] == ["0", "50 s", "100 s"] and p["top_label"] == "95 s"
    assert p["bars"][1]["h"] >= 3 and p["bars"][1]["label"] == "MP-2 COMPLETED 4 ms"
    assert (p["first"], p["last"]) == ("2026-11-24", "2026-11-25")
    assert all(b["x"] >= p["axis"]["left"] and b["y"] + b["h"] <= p["axis"]["base"] + 0.01 for b in p["bars"])
    assert [label(v) for v in (0, 0.25, 2.5, 240, 7200 * 2)] == ["0", "250 ms", "2.5 s", "4 min", "4 h"]
    assert [round_up(v) for v in (0.0064, 4.0, 95, 0)] == [0.01, 5.0, 100.0, 1.0]


def test_rate_bars_show_the_share_finished():
    p = rates(
        {"local": {"reached": 4, "finished": 1, "rate": 0.25}, "cloud": {"reached": 3, "finished": 3, "rate": 1.0}},
        width=200,
    )
    assert [(b["name"], b["w"]) for b in p["bars"]] == [("cloud", 200.0), ("local", 50.0)]


def test_the_spend_plot_puts_each_day_at_its_place_under_the_budget_line():
    days = [{"day": "2026-04-02", "usd": 1.25}, {"day": "2026-04-05", "usd": 4.0}]
    p = spend(days, 2.0)
    first, second = p["bars"]
    assert first["x"] < second["x"] and second["x"] - first["x"] > 2 * first["w"]  # days 3 and 4 left empty
    assert not first["over"] and second["over"] and "the daily budget spent" in second["label"]
    base = p["axis"]["base"]
    assert base - second["y"] == 2 * (base - p["limit_y"])  # $4 is twice as high as the $2 line
    assert [t["label"] for t in p["ticks"]] == ["$0", "$2.5", "$5"]
    assert spend(days, None)["limit_y"] is None  # no daily budget: no line
