"""A review round as a record (mp_engine/agent/state/prreview.py): the run that passed goes
on with a task quoting the comments, on where its last task left off."""

from __future__ import annotations

from mp_engine.agent.state.apply import apply
from mp_engine.agent.state.kinds import RecordKind, TaskStatus
from tests.unit.agent.state.test_ci import URL, passed


def test_a_review_adds_a_task_quoting_the_comments_and_the_run_goes_on():
    s = passed()
    rec = {"round": 1, "keys": ["comment:5"], "authors": ["alice"], "text": "- alice:\n  ## Rename it", "url": URL}
    effects = apply(s, RecordKind.PR_REVIEW, rec)
    assert [e.name for e in effects] == ["micro_task_review"] and effects[0].fields["comments"] == 1
    assert s.final is None and s.tasks[1].status is TaskStatus.ACTIVE
    task = s.plan.tasks[1]
    assert "review round 1" in task.title and "alice" in task.title
    assert URL in task.text and "    ## Rename it" in task.text and "ask it back" in task.text
    assert s.plan.needs(1) == {0}  # after every task before it
