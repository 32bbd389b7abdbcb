"""One block as a ledger step: run once, recorded, never re-run after it finished."""

from __future__ import annotations

import threading

from mp_engine.config.load import load_config
from mp_engine.core.events import EventLog
from mp_engine.execute.steps import StepContext, TimeBudget, error_output, run_block
from mp_engine.inbox.mpfile import parse
from mp_engine.record.archive import create_run
from mp_engine.record.ledger import Ledger, StepStatus
from tests.conftest import events


def context(ws, text: str, *, budget: float = 60.0) -> StepContext:
    data = text.encode()
    mp = parse(data)
    run, ledger = create_run(ws, mp_id=mp.mp_id, data=data, mp_sha256=mp.sha256, executor="shell")
    return StepContext(
        ws=ws,
        config=load_config(ws.root),
        run=run,
        ledger=ledger,
        mp=mp,
        events=EventLog(ws.events_file),
        stop=threading.Event(),
        stop_now=threading.Event(),
        budget=TimeBudget(budget, "Timeout"),
    )


def test_a_command_runs_in_the_workspace_and_its_output_is_archived(ws):
    ctx = context(ws, "# MP-9.1\n\n```bash\necho out; echo err >&2; pwd > where.txt\n```\n")
    res = run_block(ctx, ctx.mp.steps[0])
    assert res.ok and res.report.status == "ok" and res.report.exit_code == 0
    assert res.report.stdout == "out\n" and res.report.stderr == "err\n"
    assert (ws.root / "where.txt").read_text().strip() == str(ws.root)
    assert Ledger.load(ctx.run.ledger_path).step("step-001").status is StepStatus.COMPLETED
    assert [e["step"] for e in events(ws, "step_finished")] == ["step-001"]


def test_a_finished_step_is_never_run_again(ws):
    ctx = context(ws, "# MP-9.2\n\n```bash\necho run >> count.txt\n```\n")
    run_block(ctx, ctx.mp.steps[0])
    again = run_block(ctx, ctx.mp.steps[0])
    assert again.ok and (ws.root / "count.txt").read_text() == "run\n"


def test_a_failing_command_is_diagnosed_and_its_error_output_kept(ws):
    ctx = context(ws, "# MP-9.3\n\n```bash\necho before\ncat no/such/file\n```\n")
    res = run_block(ctx, ctx.mp.steps[0])
    assert not res.ok and res.diagnosis.kind == "missing_file"
    text, ref = error_output(ctx, ctx.mp.steps[0])
    assert "No such file" in text and "before" in text and ref == "steps/step-001.stderr"


def test_a_file_block_writes_exact_bytes_and_cannot_leave_the_workspace(ws):
    ctx = context(ws, "# MP-9.4\n\n```file out/a.txt\nline\n```\n\n```file ../escape.txt\nno\n```\n")
    assert run_block(ctx, ctx.mp.steps[0]).ok
    assert (ws.root / "out" / "a.txt").read_text() == "line\n"
    refused = run_block(ctx, ctx.mp.steps[1])
    assert not refused.ok and refused.diagnosis.kind == "file_refused"
    assert not (ws.root.parent / "escape.txt").exists()


def test_a_spent_budget_fails_the_step_before_it_starts(ws):
    ctx = context(ws, "# MP-9.5\n\n```bash\ntouch ran.txt\n```\n", budget=0.0)
    res = run_block(ctx, ctx.mp.steps[0])
    assert not res.ok and res.diagnosis.summary == "MP timeout before step 1"
    assert not (ws.root / "ran.txt").exists()


def test_a_stop_before_the_step_leaves_it_to_the_restart(ws):
    ctx = context(ws, "# MP-9.6\n\n```bash\ntouch ran.txt\n```\n")
    ctx.stop.set()
    res = run_block(ctx, ctx.mp.steps[0])
    assert res.interrupted and not (ws.root / "ran.txt").exists()


def test_an_interrupted_step_is_reported_not_rerun_when_so_configured(ws, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_RECOVERY__INTERRUPTED_STEP", "report")
    ctx = context(ws, "# MP-9.7\n\n```bash\ntouch ran.txt\n```\n")
    step = ctx.ledger.ensure_step("step-001", "command", "k")
    step.interrupted = True  # as recovery leaves a step the crash cut short
    res = run_block(ctx, ctx.mp.steps[0])
    assert not res.ok and res.diagnosis.kind == "interrupted" and not (ws.root / "ran.txt").exists()


def test_durations_are_whole_milliseconds_in_events_and_artifacts(ws):
    # issue #44: log lines printed `duration: 0.0064524599999913335`.
    ctx = context(ws, "# MP-9.9\n\n```bash\ntrue\n```\n\n```file f.txt\nx\n```\n")
    reports = [run_block(ctx, block).report for block in ctx.mp.steps]
    logged = [e["duration"] for e in events(ws, "step_finished")]
    assert len(logged) == 2 and all(d == round(d, 3) for d in [*logged, *(r.duration for r in reports)]), logged
