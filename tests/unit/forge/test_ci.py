"""CI on a push (mp_engine/forge/ci.py): the verdict as a table of rules, the next step,
and what a failing check tells the next prompt."""

from __future__ import annotations

import pytest

from mp_engine.forge.base import Check, CheckState, CiReport
from mp_engine.forge.ci import CiState, Step, failure_text, judge, next_step, poll_delay
from mp_engine.forge.memory import MemoryForge

PASS = Check("lint", "check_run", CheckState.PASSED, "success", "u1", "")
FAIL = Check("test", "check_run", CheckState.FAILED, "failure", "https://ci/test", "2 failed", job_id=11)
RUNNING = Check("build", "check_run", CheckState.PENDING, "in_progress", "u3", "")
RED_STATUS = Check("ci/jenkins", "status", CheckState.FAILED, "error", "https://jenkins/1", "build broke")


@pytest.mark.parametrize(
    "checks, waited, state",
    [
        ((), 10, CiState.WAITING),  # GitHub has not created the suites yet
        ((), 61, CiState.NO_CI),
        ((PASS,), 5, CiState.PASSED),
        ((PASS, RUNNING), 5, CiState.WAITING),
        ((FAIL, RUNNING), 5, CiState.WAITING),  # every check finishes before a round is spent
        ((FAIL, RUNNING), 1800, CiState.FAILED),
        ((PASS, RUNNING), 1800, CiState.TIMED_OUT),
        ((FAIL, PASS), 5, CiState.FAILED),
    ],
)
def test_the_verdict_on_what_ci_says_after_a_wait(checks, waited, state):
    verdict = judge(CiReport("s", checks), waited, timeout=1800)
    assert verdict.state is state
    assert verdict.describe()


def test_no_ci_is_treated_as_passed_and_said_so():
    verdict = judge(CiReport("s", ()), 100, timeout=1800)
    assert verdict.green and "no CI" in verdict.describe()


@pytest.mark.parametrize(
    "state, pushes, step",
    [
        (CiState.WAITING, 1, Step.WAIT),
        (CiState.PASSED, 2, Step.DONE),
        (CiState.NO_CI, 1, Step.DONE),
        (CiState.FAILED, 1, Step.FIX),
        (CiState.FAILED, 2, Step.GIVE_UP),  # ci_rounds = 2: the second push was the last CI judges
        (CiState.TIMED_OUT, 1, Step.FIX),
    ],
)
def test_red_ci_is_fixed_until_the_rounds_are_used_up(state, pushes, step):
    from mp_engine.forge.ci import CiVerdict

    assert next_step(CiVerdict(state), pushes, ci_rounds=2) is step


def test_polls_are_frequent_at_first_then_every_half_minute():
    assert poll_delay(0) == 10 and poll_delay(600) == 30


def test_a_failing_job_s_log_and_a_status_s_description_go_to_the_prompt():
    forge = MemoryForge()
    forge.logs[11] = "collecting\n" * 5000 + "FAILED test_x.py::test_y - assert 1 == 2\n"
    verdict = judge(CiReport("s", (FAIL, RED_STATUS)), 5, timeout=1800)
    text = failure_text(forge, verdict, max_bytes=4096)
    assert "## test (failure): https://ci/test" in text and "FAILED test_x.py::test_y" in text
    assert "## ci/jenkins (error): https://jenkins/1\nbuild broke" in text
    assert len(text) < 4096 + 200


def test_a_log_that_cannot_be_read_leaves_the_summary():
    text = failure_text(MemoryForge(), judge(CiReport("s", (FAIL,)), 5, timeout=1800))
    assert "2 failed" in text and "could not be read" in text
