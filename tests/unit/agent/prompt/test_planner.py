"""The planner's prompt: goal, checks, map, the answer's schema, a re-plan's cause, the memory."""

from __future__ import annotations

from mp_engine.agent.plan import planner as planning
from mp_engine.agent.prompt import planner
from tests.unit.agent.plan.test_planner import MP, t, valid


def test_the_prompt_carries_goal_checks_map_schema_and_on_a_re_plan_what_failed():
    text = planner.prompt(
        mp=MP,
        goal="Make it so.",
        nonce="N9",
        repo_map="## Repository map\n\nsrc/x.py",
        round_=1,
        done=[{"mt_id": "MT-001", "ref": "a", "title": "do a"}],
        failure="MT-002: its chain gave up",
        previous_error="the plan is not JSON",
    )
    for part in (
        "(re-plan 1)",
        "Make it so.",
        "check-002:",
        "test -f b",
        "- MT-001 (a): do a",
        "MT-002: its chain gave up",
        "## Repository map",
        '<plan nonce="N9">',
        "the plan is not JSON",
    ):
        assert part in text, part


def test_a_planned_task_may_be_a_pause_point():
    recs = valid(t("schema"), t("migrate", "schema", pause=True))
    assert [bool(r.get("pause")) for r in recs] == [False, True]
    assert [m.pause for m in planning.micro_tasks(recs)] == [False, True]
    assert '"pause": false' in planner.prompt(
        mp=MP, goal="g", nonce="N", round_=0, done=[], failure="", previous_error=None, repo_map=""
    )


def test_the_planner_sees_the_repositorys_memory():
    text = planner.prompt(mp=MP, goal="g", nonce="N", round_=0, done=[], repo_map="", memory="# M\n\n- use uv")
    assert "## Memory of this repository" in text and "- use uv" in text
    assert text.index("- use uv") < text.index("## Acceptance checks")
