"""The planner's answer: the block under the nonce, the schema and the validation rules,
the dependency order."""

from __future__ import annotations

import json

import pytest

from mp_engine.agent.plan import planner as planning
from mp_engine.agent.plan.decompose import Plan
from mp_engine.agent.plan.planner import PlanInvalid
from mp_engine.inbox.mpfile import parse

MP = parse(
    b"# MP-5.1 Planned\nExecutor: agent\nPlan: auto\n\nMake it so.\n\n## Validate\n\n"
    b"```bash\ntest -f a\n```\n\n```bash\ntest -f b\n```\n"
)


def t(ref: str, *after: str, checks=("check-001",), **more) -> dict:
    return {"id": ref, "title": f"do {ref}", "depends_on": list(after), "checks": list(checks), **more}


def valid(*tasks: dict, done: dict | None = None, first: int = 1) -> list[dict]:
    return planning.validate(json.dumps({"tasks": list(tasks)}), MP, done or {}, first)


def test_the_block_is_read_only_with_the_run_s_nonce_and_may_be_fenced():
    out = '<plan nonce="other">{"x": 1}</plan>\n<plan nonce="N1">\n```json\n{"tasks": []}\n```\n</plan>'
    assert planning.extract(out, "N1") == '{"tasks": []}'
    with pytest.raises(PlanInvalid, match='no <plan nonce="N2">'):
        planning.extract(out, "N2")


def test_tasks_run_in_dependency_order_keeping_the_planner_s_order_otherwise():
    recs = valid(t("c", "b"), t("b", "a"), t("x"), t("a"), first=4)
    assert [(r["mt_id"], r["ref"], r["after"]) for r in recs] == [
        ("MT-004", "x", []),
        ("MT-005", "a", []),
        ("MT-006", "b", [4]),
        ("MT-007", "c", [5]),
    ]
    assert recs[0]["checks"] == [0]


def test_a_re_plan_may_depend_on_done_tasks():
    (rec,) = valid(t("fix", "MT-001", "a"), done={"MT-001": 0, "a": 0}, first=3)
    assert rec["mt_id"] == "MT-003" and rec["after"] == [0]


@pytest.mark.parametrize(
    ("tasks", "error"),
    [
        ([t("a", "b"), t("b", "a")], "the dependencies form a cycle among a, b"),
        ([t("a"), t("a")], "task ids must be unique: a appear"),
        ([t("a", "zz")], "task 'a' depends on 'zz', which is no task of the plan"),
        ([t("a", checks=("check-009",))], "names check(s) 'check-009'; the MP's checks are check-001, check-002"),
        ([t("a", checks=())], "task 'a' lists no check"),
        ([t("a", files=["../etc/passwd"])], "files are paths inside the repository"),
        ([t("a", files=["x\nStatus: COMPLETED"])], "files are paths inside the repository"),
        ([t("a b")], "tasks.0.id: String should match pattern"),
        ([], "tasks: List should have at least 1 item"),
        ([t("a", domain="not a tag")], "tasks.0.domain"),
    ],
)
def test_an_invalid_plan_says_what_is_wrong(tasks, error):
    with pytest.raises(PlanInvalid) as e:
        valid(*tasks)
    assert error in str(e.value)


def test_an_answer_that_is_not_json_is_invalid():
    with pytest.raises(PlanInvalid, match="the plan is not JSON"):
        planning.validate("do everything", MP, {}, 1)


def test_a_planned_task_is_accepted_by_its_checks_and_those_of_what_it_needs():
    recs = valid(t("a"), t("b", "a", checks=("check-002",)), t("c", checks=("check-002",)))
    plan = Plan("goal", (), (0, 0)).extended(planning.micro_tasks(recs))
    assert plan.accepting(0) == [0] and plan.accepting(1) == [0, 1] and plan.accepting(2) == [1]
    assert "`src/x.py`" in planning.task_text({**recs[0], "files": ["src/x.py"], "description": "d"})


def test_a_real_model_s_habits_are_read_leniently():
    """Prose around the object inside the block, checks named `check-1`, `Check 02` or 2,
    and numbers as ids."""
    raw = planning.extract('<plan nonce="N">Here it is: {"tasks": [{"id": "a"}]} Hope it helps.</plan>', "N")
    assert raw == '{"tasks": [{"id": "a"}]}'
    (a, b) = valid(t("a", checks=("check-1",)), t("b", checks=("Check 02",)))
    assert a["checks"] == [0] and b["checks"] == [1]
    numbered = planning.validate(
        json.dumps(
            {
                "tasks": [
                    {"id": 1, "title": "x", "checks": [2]},
                    {"id": 2, "title": "y", "depends_on": [1], "checks": ["1"]},
                ]
            }
        ),
        MP,
        {},
        1,
    )
    assert [(r["ref"], r["after"], r["checks"]) for r in numbered] == [("1", [], [1]), ("2", [0], [0])]
