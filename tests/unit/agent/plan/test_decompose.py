"""The decomposition rule (mp_engine/agent/plan/decompose.py): MTs are generated from the MP."""

from __future__ import annotations

import json

import pytest

from mp_engine.agent.executor import AgentExecutor
from mp_engine.agent.plan.decompose import decompose
from mp_engine.cli.main import main
from mp_engine.core.errors import InvalidMPError
from mp_engine.inbox.mpfile import parse
from tests.agentutil import GREET


def mp(text: str):
    return parse(text.encode())


def test_each_top_level_numbered_item_is_one_micro_task_with_its_block_and_continuation():
    plan = decompose(
        mp(
            """# MP-1.1 Health check
Executor: agent

Add a health endpoint to the service.

1. Create `app/health.py` with a function `health()`
   returning "ok".
   - it must not import flask
2) Add a test:
   ```python
   assert health() == "ok"
   ```

Keep the style of the repository.
"""
        )
    )
    assert [t.mt_id for t in plan.tasks] == ["MT-001", "MT-002"]
    first, second = plan.tasks
    assert first.line == 6 and first.title == "Create `app/health.py` with a function `health()`"
    assert 'returning "ok".' in first.text and "- it must not import flask" in first.text
    assert "assert health()" in second.text and "Keep the style" not in second.text
    assert plan.goal.startswith("Health check") and "Add a health endpoint" in plan.goal
    assert "Keep the style of the repository." in plan.goal


def test_bullets_are_micro_tasks_and_nested_bullets_stay_in_their_parent():
    plan = decompose(mp("# MP-1.2 T\nExecutor: agent\n\n- one\n  - detail\n* two\n+ three\n"))
    assert [t.title for t in plan.tasks] == ["one", "two", "three"]
    assert "detail" in plan.tasks[0].text


def test_a_single_paragraph_or_prose_without_a_list_is_one_micro_task():
    plan = decompose(mp("# MP-1.3 T\nExecutor: agent\n\nRename foo to bar everywhere.\n\nThen run the tests.\n"))
    assert len(plan.tasks) == 1
    assert plan.tasks[0].text == "Rename foo to bar everywhere.\n\nThen run the tests."
    assert plan.tasks[0].line == 4


def test_the_validate_section_is_not_an_instruction_and_checks_accept_every_mt_by_default():
    m = mp(GREET.replace("# MT-002\n", ""))
    plan = decompose(m)
    assert all("grep" not in t.text for t in plan.tasks)
    assert [c["checks"] for c in plan.summary(m)] == [["check-001", "check-002"], ["check-001", "check-002"]]


def test_a_check_naming_an_mt_accepts_it_and_every_later_mt():
    m = mp(GREET)
    assert [c["checks"] for c in decompose(m).summary(m)] == [["check-001"], ["check-001", "check-002"]]


def test_a_check_naming_an_unknown_mt_is_refused_with_a_fix():
    with pytest.raises(InvalidMPError) as e:
        decompose(mp(GREET.replace("# MT-002", "# MT-007")))
    assert "MT-007" in e.value.reason and "mp-engine check" in e.value.fix and e.value.line == 15


def test_an_agent_mp_without_instructions_is_invalid():
    with pytest.raises(InvalidMPError) as e:
        AgentExecutor().validate(mp("# MP-1.4 Empty\nExecutor: agent\n\n## Validate\n\n```bash\ntrue\n```\n"))
    assert "no instructions" in e.value.reason


def test_check_prints_the_decomposition(tmp_path, capsys):
    f = tmp_path / "mp.md"
    f.write_text(GREET)
    assert main(["check", str(f)]) == 0
    out = capsys.readouterr().out
    assert "micro-tasks (2)" in out
    assert 'MT-001  line 6    Write "hello" to `out/a.txt`.  [check-001]' in out
    assert "MT-002  line 7    " in out and "[check-001, check-002]" in out
    assert main(["check", "--json", str(f)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [t["id"] for t in data["micro_tasks"]] == ["MT-001", "MT-002"]


def test_a_micro_task_without_a_check_of_its_own_is_merged_into_the_next():
    """Every check names MT-002: MT-001 alone could be 'completed' on the agent's word, so
    it is merged into MT-002 and the tags renumbered (EXACT means verified, issue #16)."""
    mp = parse(
        b"# MP-4.1 Three\nExecutor: agent\n\n1. Write a.\n2. Write b.\n3. Write c.\n\n## Validate\n\n"
        b"```bash\n# MT-002\ntest -f b\n```\n\n```bash\n# MT-003\ntest -f c\n```\n"
    )
    plan = decompose(mp)
    assert [t.mt_id for t in plan.tasks] == ["MT-001", "MT-002"]
    assert "Write a." in plan.tasks[0].text and "Write b." in plan.tasks[0].text
    assert plan.check_from == (0, 1)
    assert [len(plan.checks_for(mp, t.index)) for t in plan.tasks] == [1, 2]


def test_a_domain_tag_on_an_item_routes_its_micro_task():
    m = mp(
        "# MP-5.1 T\n\n1. [Docs] Update the README.\n2. [link](http://x) is no tag.\n"
        "3. [api]: a colon after it is prose.\n4. Plain.\n"
    )
    plan = decompose(m)
    assert [t.domain for t in plan.tasks] == ["docs", None, None, None]
    assert plan.summary(m)[0]["domain"] == "docs" and plan.summary(m)[3]["domain"] is None


def test_merged_micro_tasks_keep_the_first_items_domain():
    text = "# MP-5.2 T\n\n1. [docs] Write a.\n2. Write b.\n\n## Validate\n\n```bash\n# MT-002\ntrue\n```\n"
    plan = decompose(mp(text))
    assert len(plan.tasks) == 1 and plan.tasks[0].domain == "docs"


def test_after_names_the_earlier_micro_tasks_an_item_needs():
    m = mp("# MP-5.3 T\n\n1. Write a.\n2. (after none) Write b.\n3. Write c (after MT-001, mt-002).\n4. Write d.\n")
    plan = decompose(m)
    assert [plan.needs(i) for i in range(4)] == [set(), set(), {0, 1}, {0, 1, 2}]  # no (after): every earlier one
    assert plan.summary(m)[2]["after"] == ["MT-001", "MT-002"]


@pytest.mark.parametrize("bad", ["(after MT-002)", "(after MT-009)"])
def test_after_may_name_only_earlier_micro_tasks(bad):
    with pytest.raises(InvalidMPError, match="can only need earlier ones") as e:
        decompose(mp(f"# MP-5.4 T\n\n1. Write a.\n2. Write b {bad}.\n"))
    assert e.value.line == 4


def test_after_follows_a_merge_of_unchecked_micro_tasks():
    text = (
        "# MP-5.5 T\n\n1. Write a.\n2. Write b.\n3. (after MT-001) Write c.\n\n"
        "## Validate\n\n```bash\n# MT-002\ntrue\n```\n"
    )
    plan = decompose(mp(text))
    assert [t.mt_id for t in plan.tasks] == ["MT-001", "MT-002"] and plan.needs(1) == {0}


def test_a_list_item_marked_pause_is_a_pause_point_without_the_mark():
    mp = parse(
        b"# MP-1.9\nExecutor: agent\n\n1. Add the column.\n2. (Pause) Run the migration.\n\n## Validate\n\n"
        b"```bash\ntrue\n```\n"
    )
    plan = decompose(mp)
    assert [t.pause for t in plan.tasks] == [False, True]
    assert plan.tasks[1].text == "2. Run the migration." and plan.tasks[1].title == "Run the migration."
