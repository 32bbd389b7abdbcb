"""The verdict (issue #43, "Judged honestly"): the agent's patch on a fresh copy at the base,
the judging tests' files put back, the test patch applied, the tests run. And the probe that
tells an environment that cannot judge from an agent that failed."""

from __future__ import annotations

import pytest

from mp_engine.eval.checkout import mirror
from mp_engine.eval.judge import Judgement, judge, probe
from mp_engine.eval.results import Verdict
from mp_engine.eval.tasks import Task
from mp_engine.eval.testcmd import Shell
from tests.evalutil import ADD_TEST, CALC_FIXED, CHEAT_TEST, F2P, P2P, TEST_CMD, calc_repo, diff_of


@pytest.fixture
def calc(tmp_path):
    """(a task about the calc repository, its mirror, its base, a shell for the copy)."""
    repo, base = calc_repo(tmp_path / "calc")
    task = Task(
        "calc-1",
        "calc",
        str(repo),
        base,
        "add subtracts",
        diff_of(repo, {"tests/test_add.py": ADD_TEST}),
        tuple(F2P),
        tuple(P2P),
        test=TEST_CMD,
    )
    source = tmp_path / "m.git"
    mirror(str(repo), source, base)
    copy = tmp_path / "copy"
    return task, source, base, Shell(copy, tmp_path / "logs"), repo


def test_the_fix_is_resolved_and_no_change_is_not(calc):
    task, source, base, shell, repo = calc
    fixed = judge(task, source, base, diff_of(repo, {"calc.py": CALC_FIXED}), shell.cwd, shell)
    assert fixed.verdict == Verdict.RESOLVED and fixed.fail_to_pass == {F2P[0]: True}
    assert all(fixed.pass_to_pass.values()) and fixed.duration > 0
    assert not shell.cwd.exists()  # the judging copy does not outlive the verdict
    nothing = judge(task, source, base, "", shell.cwd, shell)
    assert nothing.verdict == Verdict.UNRESOLVED and nothing.fail_to_pass == {F2P[0]: False}
    assert nothing.why == f"failing: {F2P[0]}"


def test_writing_where_the_hidden_tests_go_does_not_help(calc):
    task, source, base, shell, repo = calc
    cheat = diff_of(repo, {"tests/test_add.py": CHEAT_TEST})  # the test passes, the bug stays
    assert judge(task, source, base, cheat, shell.cwd, shell).verdict == Verdict.UNRESOLVED
    both = diff_of(repo, {"tests/test_add.py": CHEAT_TEST, "calc.py": CALC_FIXED})
    assert judge(task, source, base, both, shell.cwd, shell).verdict == Verdict.RESOLVED


def test_breaking_a_test_that_passed_is_unresolved(calc):
    task, source, base, shell, repo = calc
    broke = diff_of(repo, {"calc.py": CALC_FIXED.replace("a * b", "a ** b")})
    j = judge(task, source, base, broke, shell.cwd, shell)
    assert j.verdict == Verdict.UNRESOLVED and j.pass_to_pass["tests.test_mul.MulTest.test_mul"] is False


def test_a_setup_that_fails_is_the_environment_s_not_the_agent_s(calc):
    task, source, base, shell, _repo = calc
    broken = Task(**{**task.__dict__, "setup": "echo no compiler >&2; exit 7"})
    j = judge(broken, source, base, "", shell.cwd, shell)
    assert j.verdict == Verdict.ENV_ERROR and j.why == "setup failed (exit 7): no compiler"
    assert probe(broken, source, base, shell.cwd, shell).verdict == Verdict.ENV_ERROR


def test_the_probe_accepts_a_task_that_can_judge_and_names_why_one_cannot(calc):
    task, source, base, shell, _repo = calc
    ok = probe(task, source, base, shell.cwd, shell)
    assert ok.verdict == Verdict.RESOLVED and ok.why == ""
    stale = Task(**{**task.__dict__, "fail_to_pass": ("tests.test_mul.MulTest.test_mul",)})
    assert "FAIL_TO_PASS tests pass before any change" in probe(stale, source, base, shell.cwd, shell).why
    missing = Task(**{**task.__dict__, "pass_to_pass": ("tests.test_gone.X.test_x",)})
    j = probe(missing, source, base, shell.cwd, shell)
    assert j.verdict == Verdict.ENV_ERROR and "PASS_TO_PASS tests fail at the base commit" in j.why
    stale_patch = "--- a/tests/test_mul.py\n+++ b/tests/test_mul.py\n@@ -1 +1 @@\n-not what the file says\n+x\n"
    unapplied = probe(Task(**{**task.__dict__, "test_patch": stale_patch}), source, base, shell.cwd, shell)
    assert unapplied.verdict == Verdict.ENV_ERROR and "applying the test patch failed" in unapplied.why
    assert Judgement.from_json(ok.to_json()).to_json() == ok.to_json()
