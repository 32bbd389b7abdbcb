"""A metric check's verdict (issue #34): exit 0 is not enough; the number it printed last
must meet the target, and a miss is diagnosed with the value and the target."""

from __future__ import annotations

import json

from mp_engine.execute.steps import run_block
from mp_engine.record.ledger import read_artifact
from tests.unit.execute.test_steps import context

CHECK = '# MP-9.7\n\n```bash\ntrue\n```\n\n## Validate\n\n```bash metric="coverage >= 0.90"\n{body}\n```\n'


def artifact(ctx, step_id):
    return read_artifact(ctx.run.steps_dir, ctx.ledger.step(step_id))


def test_a_metric_meeting_its_target_passes_and_is_recorded(ws):
    ctx = context(ws, CHECK.format(body="echo collected; echo 0.93"))
    res = run_block(ctx, ctx.mp.checks[0])
    assert res.ok and res.diagnosis is None
    assert artifact(ctx, "check-001")["metric"] == {
        "name": "coverage",
        "op": ">=",
        "target": 0.9,
        "value": 0.93,
        "met": True,
        "distance": 0.0,
    }


def test_a_metric_short_of_its_target_fails_with_the_value_and_the_target(ws):
    ctx = context(ws, CHECK.format(body="echo 0.85"))
    res = run_block(ctx, ctx.mp.checks[0])
    assert not res.ok and res.report.exit_code == 0
    d = res.diagnosis
    assert d.kind == "metric_unmet" and d.summary == "coverage 0.85, target >= 0.9"
    assert "Bring coverage to >= 0.9 (it is 0.85)" in d.fix and d.line == 9
    assert artifact(ctx, "check-001")["metric"]["met"] is False
    assert json.loads(json.dumps(artifact(ctx, "check-001")))["ok"] is False


def test_a_metric_check_that_prints_no_number_or_fails_is_a_failing_check(ws):
    ctx = context(ws, CHECK.format(body="echo all good"))
    res = run_block(ctx, ctx.mp.checks[0])
    assert not res.ok and res.diagnosis.summary == "check 1 printed no coverage"
    assert "print coverage as a number on its last output line" in res.diagnosis.fix
    failing = context(ws, CHECK.format(body="echo 0.95; exit 3").replace("MP-9.7", "MP-9.8"))
    res = run_block(failing, failing.mp.checks[0])
    assert not res.ok and res.diagnosis.kind != "metric_unmet"  # the exit code's own diagnosis


EXPECT = '# MP-9.9\n\n## Validate\n\n```bash stdout_contains="{want}" stdout_not_contains="Traceback"\n{body}\n```\n'


def test_a_check_whose_output_says_what_its_fence_asks_passes_and_the_finding_is_kept(ws):
    ctx = context(ws, EXPECT.format(want="3 passed", body="echo '3 passed in 0.1s'"))
    res = run_block(ctx, ctx.mp.checks[0])
    assert res.ok and res.diagnosis is None
    kept = artifact(ctx, "check-001")["expect"]
    assert kept == {"contains": ["3 passed"], "not_contains": ["Traceback"], "missing": [], "unwanted": [], "met": True}


def test_exit_0_without_the_text_or_with_an_unwanted_one_fails_naming_the_text(ws):
    ctx = context(ws, EXPECT.format(want="3 passed", body="echo '2 passed, 1 skipped'"))
    res = run_block(ctx, ctx.mp.checks[0])
    assert not res.ok and res.report.exit_code == 0
    d = res.diagnosis
    assert d.kind == "output_unexpected" and d.summary == "check 1's output lacks '3 passed'" and d.line == 5
    assert "`stdout_contains`" in d.diagnosis and "Approves: MP-9.9" in d.fix
    assert artifact(ctx, "check-001")["ok"] is False
    noisy = context(ws, EXPECT.format(want="ok", body="echo ok; echo Traceback").replace("MP-9.9", "MP-9.10"))
    res = run_block(noisy, noisy.mp.checks[0])
    assert not res.ok and res.diagnosis.summary == "check 1's output contains 'Traceback'"
    failing = context(ws, EXPECT.format(want="ok", body="echo ok; exit 4").replace("MP-9.9", "MP-9.11"))
    res = run_block(failing, failing.mp.checks[0])
    assert not res.ok and res.diagnosis.kind != "output_unexpected"  # the exit code's own diagnosis
