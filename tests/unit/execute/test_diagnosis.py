"""Why a step failed: the most certain fact first, then the error output, one fix each."""

from __future__ import annotations

import signal

import pytest

from mp_engine.execute.diagnosis import (
    Failure,
    classify_process,
    file_refused,
    interrupted,
    mp_timeout_before,
    start_failed,
)


def classify(**over):
    args = dict(
        label="step",
        number=2,
        step_id="step-002",
        line=9,
        command="make build\nmake test",
        exit_code=1,
        signal=None,
        timed_out=False,
        timeout=60.0,
        timeout_source="Step-Timeout",
        stderr="",
        stdout="",
        mp_id="MP-7.1",
    )
    args.update(over)
    return classify_process(Failure(**args))


def test_a_step_timeout_names_the_step_and_proposes_a_longer_one():
    d = classify(timed_out=True, exit_code=None, stderr="command not found")  # the timeout is certain
    assert d.kind == "timeout" and d.summary == "timeout in step 2"
    assert "Step-Timeout: 120" in d.fix and "Approves: MP-7.1" in d.fix
    assert "`make build`" in d.diagnosis and d.step_id == "step-002" and d.line == 9


def test_the_mp_budget_running_out_proposes_a_bigger_budget():
    d = classify(timed_out=True, timeout=30.0, timeout_source="Timeout")
    assert d.summary == "MP timeout in step 2" and "`Timeout: 60`" in d.fix


def test_sigkill_hints_at_the_oom_killer():
    d = classify(exit_code=None, signal=signal.SIGKILL)
    assert d.kind == "killed" and "SIGKILL" in d.summary and "out-of-memory" in d.diagnosis


@pytest.mark.parametrize(
    ("stderr", "exit_code", "kind", "named"),
    [
        ("bash: line 3: jq: command not found", 127, "command_not_found", "`jq`"),
        ("/bin/sh: 1: rg: not found", 127, "command_not_found", "`rg`"),
        ("", 127, "command_not_found", "`make`"),
        ("bash: ./deploy.sh: Permission denied", 126, "permission_denied", "`./deploy.sh`"),
        ("cp: error writing 'x': No space left on device", 1, "disk_full", "disk"),
        ("curl: (6) Could not resolve host: example.invalid", 6, "network", "Could not resolve host"),
        ("bash: -c: line 2: syntax error: unexpected end of file", 2, "syntax_error", "syntax error"),
        ("cat: config/app.yml: No such file or directory", 1, "missing_file", "`config/app.yml`"),
        ("make: *** [all] Error 2", 2, "nonzero_exit", "exited with code 2"),
    ],
)
def test_the_error_output_decides_the_class(stderr, exit_code, kind, named):
    d = classify(stderr=stderr, exit_code=exit_code)
    assert d.kind == kind
    assert named in d.diagnosis
    assert d.fix.count(".") >= 1 and d.fix  # exactly one proposed fix, a sentence


def test_a_failed_check_says_the_steps_ran():
    d = classify(label="check", number=1, step_id="check-001", command="grep -q ok out.txt")
    assert d.kind == "validation_failed" and "The steps ran" in d.diagnosis


def test_the_other_failures_each_carry_one_fix():
    assert "src/passwd" in file_refused("step-001", 1, 3, "/etc/passwd", "absolute path", "MP-1.0").fix
    assert interrupted("step-002", "step", 2, "MP-1.0").kind == "interrupted"
    assert "`Timeout: 20`" in mp_timeout_before("step-003", "step", 3, 10.0, "MP-1.0").fix
    assert "`[execution] shell`" in start_failed("step-001", "step", 1, 2, "No such file", "MP-1.0").fix
