"""At most `calls_per_hour` agent calls in any rolling hour, persisted across restarts."""

from __future__ import annotations

from mp_engine.agent.call.limiter import CallLimiter


def test_the_call_limit_is_a_rolling_hour_persisted_across_instances(tmp_path):
    path = tmp_path / "calls.log"
    limiter = CallLimiter(path, per_hour=2)
    assert limiter.next_slot(1000.0) is None
    limiter.record(1000.0)
    limiter.record(1500.0)
    assert limiter.next_slot(1600.0) == 4600.0  # when the oldest call leaves the window
    again = CallLimiter(path, per_hour=2)  # a restarted engine
    assert again.used(1600.0) == 2 and again.next_slot(1600.0) == 4600.0
    assert again.next_slot(4600.5) is None and again.used(4600.5) == 1


def test_the_call_log_survives_a_torn_line_and_is_compacted_to_the_window(tmp_path):
    path = tmp_path / "calls.log"
    path.write_text("100.0\n200.0\n1.5e")  # a crash mid-append left a partial last line
    limiter = CallLimiter(path, per_hour=1)
    assert limiter.used(300.0) == 2
    times = [10_000.0 + 100 * k for k in range(66)]  # more lines than the window needs
    for t in times:
        limiter.record(t)
    lines = [float(x) for x in path.read_text().split()]
    assert lines[-1] == times[-1] and len(lines) < len(times)  # rewritten, not only appended
    assert min(lines) > times[-2] - 3600  # what the rewrite kept was in the window then
    assert CallLimiter(path, per_hour=1).used(times[-1]) == len([t for t in times if t > times[-1] - 3600])
