"""CI's verdict on the pull request as a record (mp_engine/agent/state/ci.py): red with
rounds left adds a task that quotes CI to the same run; red with the rounds used up, or a
session that ended otherwise, ends it BLOCKED; green changes nothing."""

from __future__ import annotations

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.state.apply import apply
from mp_engine.agent.state.kinds import RecordKind, TaskStatus
from tests.unit.agent.state.states import begin
from tests.unit.agent.state.test_iteration import cfg, plan, rec

URL = "https://github.com/me/app/pull/1"


def passed():
    s = begin(cfg(), plan(1), "base")
    apply(s, RecordKind.ITERATION, rec(s, gate=True))
    assert s.final is not None and s.final.type == cert.EXACT
    return s


def verdict(step: str, **more) -> dict:
    return {"round": 1, "sha": "a" * 40, "state": "failed", "step": step, "failing": ["tests"], "url": URL, **more}


def test_red_with_rounds_left_adds_a_task_quoting_ci_and_the_run_goes_on():
    s = passed()
    effects = apply(s, RecordKind.CI, verdict("fix", text="## tests (failure)\nci.txt is missing"))
    assert [e.name for e in effects] == ["pull_request_ci", "micro_task_ci_fix"]
    assert s.final is None and [t.mt_id for t in s.tasks] == ["MT-001", "MT-002"]
    assert s.tasks[1].status is TaskStatus.ACTIVE and s.focus == 1
    fix = s.plan.tasks[1]
    assert "Make CI pass" in fix.title and "    ci.txt is missing" in fix.text  # quoted: its headings stay text


def test_red_with_the_rounds_used_up_ends_the_run_blocked_quoting_the_failing_checks():
    s = passed()
    apply(s, RecordKind.CI, verdict("give_up"))
    assert s.final is not None and (s.final.type, s.final.reason) == (cert.BLOCKED, "ci_failed")
    assert "tests" in s.final.detail and URL in s.final.detail and len(s.tasks) == 1


def test_a_session_that_ended_otherwise_ends_the_run_blocked_with_its_reason():
    s = passed()
    apply(s, RecordKind.CI, verdict("ended", state="ended", why="branch_moved", detail="someone else pushed"))
    assert s.final is not None and (s.final.reason, s.final.detail) == ("branch_moved", "someone else pushed")
    assert s.fatal_fix is None  # the reason's own fix (agent/judge/certificate.py)


def test_an_ending_that_proposes_its_fix_gives_it_to_the_result_s_diagnosis():
    s = passed()
    said = "GitHub found nothing for read CI on me/app (404)"
    fix = "check that [repos.app] url and api_url name the repository"
    effects = apply(s, RecordKind.CI, verdict("ended", state="ended", why="pull_request_forge", detail=said, fix=fix))
    assert effects[0].fields["why"] == "pull_request_forge" and effects[0].fields["url"] == URL
    assert s.final is not None and s.final.reason == "pull_request_forge" and s.fatal_fix == fix
    d = cert.diagnosis(s.final, "MP-41.2", fix=s.fatal_fix)
    assert (d.kind, d.diagnosis, d.fix) == ("pull_request_forge", said, fix)


def test_green_changes_nothing_but_says_so():
    s = passed()
    effects = apply(s, RecordKind.CI, verdict("done", state="passed", failing=[]))
    assert [e.name for e in effects] == ["pull_request_ci"] and s.final is not None and s.final.type == cert.EXACT
