"""The shell executor: blocks in document order, then checks; stop at the first failure."""

from __future__ import annotations

import threading

import pytest

from mp_engine.config.load import load_config
from mp_engine.core.errors import InvalidMPError
from mp_engine.core.events import EventLog
from mp_engine.execute.shell import ShellExecutor
from mp_engine.execute.steps import StepContext, TimeBudget
from mp_engine.inbox.mpfile import parse
from mp_engine.record.archive import create_run


def context(ws, text: str) -> StepContext:
    data = text.encode()
    mp = parse(data)
    run, ledger = create_run(ws, mp_id=mp.mp_id, data=data, mp_sha256=mp.sha256, executor="shell")
    return StepContext(
        ws,
        load_config(ws.root),
        run,
        ledger,
        mp,
        EventLog(ws.events_file),
        threading.Event(),
        threading.Event(),
        TimeBudget(60, "Timeout"),
    )


def test_steps_then_checks_all_pass(ws):
    ctx = context(
        ws,
        '# MP-4.1\n```bash\necho 1 > a\n```\n```bash\necho 2 >> a\n```\n## Validate\n```bash\ntest "$(wc -l < a)" = 2\n```\n',
    )
    res = ShellExecutor().run(ctx)
    assert res.status == "completed" and res.diagnosis is None
    assert [r.status for r in res.steps + res.checks] == ["ok", "ok", "ok"]


def test_the_first_failure_stops_everything_after_it(ws):
    ctx = context(ws, "# MP-4.2\n```bash\nexit 3\n```\n```bash\ntouch never\n```\n## Validate\n```bash\ntrue\n```\n")
    res = ShellExecutor().run(ctx)
    assert res.status == "failed" and res.diagnosis.step_id == "step-001"
    assert [r.status for r in res.steps] == ["failed", "not run"] and [r.status for r in res.checks] == ["not run"]
    assert not (ws.root / "never").exists()


def test_a_failing_check_fails_the_mp_with_its_output(ws):
    ctx = context(ws, "# MP-4.3\n```bash\ntrue\n```\n## Validate\n```bash\necho 'expected 3 got 2' >&2; exit 1\n```\n")
    res = ShellExecutor().run(ctx)
    assert res.status == "failed" and res.diagnosis.kind == "validation_failed"
    assert "expected 3 got 2" in res.error_output and res.error_output_ref == "steps/check-001.stderr"


def test_a_stop_between_steps_interrupts_and_the_rest_waits(ws):
    ctx = context(ws, "# MP-4.4\n```bash\ntouch one\n```\n```bash\ntouch two\n```\n")
    ctx.stop.set()
    res = ShellExecutor().run(ctx)
    assert res.status == "interrupted" and not (ws.root / "one").exists()


def test_validate_refuses_an_mp_with_nothing_to_run():
    with pytest.raises(InvalidMPError):
        ShellExecutor().validate(parse(b"# MP-4.5 Words only\n\nNothing runnable.\n"))
