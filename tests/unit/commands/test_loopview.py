"""What `mp-engine loop` shows (issue #34): the events of a run as plain lines and as the
rows of the live table, control characters escaped."""

from __future__ import annotations

import io

from mp_engine.commands.loopview import LiveOut, LoopView, PlainOut


def test_events_become_lines_and_rows():
    now = [100.0]
    view = LoopView("MP-1.2", "Fix \x1b[31mit", clock=lambda: now[0])
    events = [
        {"event": "micro_task_loop_started", "micro_tasks": ["MT-001", "MT-002"]},
        {"event": "micro_task_iteration_started", "mt": "MT-001", "iteration": 1, "level": 0, "agent": "claude"},
        {"event": "step_started", "step": "x"},  # not shown
        {"event": "micro_task_iteration_complete", "mt": "MT-001", "iteration": 1, "residual": 0.25, "call": "ok"},
        {"event": "micro_task_escalated", "mt": "MT-001", "to_level": 1},
        {"event": "micro_task_complete", "mt": "MT-001"},
        {"event": "micro_task_skipped", "mt": "MT-002", "why": "needs \x07 MT-001"},
        {"event": "micro_task_loop_failed", "certificate": "DIVERGED", "reason": "breaker:no_progress"},
    ]
    out = io.StringIO()
    plain = PlainOut(view, out)
    now[0] = 163.0
    for e in events:
        plain(e)
    assert out.getvalue().splitlines() == [
        "[01:03] MP-1.2: 2 micro-task(s): MT-001, MT-002",
        "[01:03] MT-001 iteration 1, level 0 (claude): started",
        "[01:03] MT-001 iteration 1: residual 0.25 (call ok)",
        "[01:03] MT-001 escalated to level 1",
        "[01:03] MT-001 completed",
        "[01:03] MT-002 skipped: needs \\x07 MT-001",
        "[01:03] agent loop ended: certificate DIVERGED (breaker:no_progress)",
    ]
    rows = {r.mt: (r.status, r.level, r.iteration, r.residual) for r in view.rows.values()}
    assert rows == {"MT-001": ("completed", "claude", 1, 0.25), "MT-002": ("skipped", "-", 0, None)}
    assert view.title == "Fix \\x1b[31mit"  # an MP's title never reaches the terminal as an escape


def test_the_table_shows_every_task_and_is_redrawn_in_place():
    view = LoopView("MP-1.3", "Goal")
    view.apply({"event": "micro_task_iteration_started", "mt": "MT-001", "iteration": 2, "level": 1, "agent": "codex"})
    lines = view.table()
    assert lines[0].startswith("MP-1.3 Goal  [") and lines[1].split() == [
        "task",
        "status",
        "level",
        "iteration",
        "residual",
    ]
    assert lines[2].split() == ["MT-001", "running", "codex", "2", "-"]
    assert lines[-1] == "MT-001 iteration 2, level 1 (codex): started"
    out = io.StringIO()
    live = LiveOut(view, out)
    live.draw()
    live.draw()  # the second draw goes back over the first
    text = out.getvalue()
    assert text.count("MT-001") == 4 and f"\x1b[{len(lines)}F\x1b[J" in text
