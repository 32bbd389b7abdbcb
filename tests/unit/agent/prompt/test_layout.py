"""The prompt of an iteration is built from artifacts: the previous iteration's record,
the failing checks' output, the learnings and the budget, never from a chat history."""

from __future__ import annotations

from mp_engine.agent.plan.decompose import decompose
from mp_engine.agent.prompt import layout as prompt
from mp_engine.inbox.mpfile import parse

MP = b"""# MP-9.1
Executor: agent

Build the thing.

1. Write "a" to `a.txt`.
2. Write "b" to `b.txt`.

## Validate
```bash
test -f a.txt
```
```bash
# MT-002
test -f b.txt
```
"""


ENTRY = "# Learnings\n\n<!-- entry: MT-001_iter-001 -->\n"


def previous(**fields):
    rec = {
        "iteration": 1,
        "level": 0,
        "call": {"kind": "ok", "detail": ""},
        "passed": [],
        "failing": ["check-1"],
        "claimed": False,
        "status_problem": None,
    }
    rec.update(fields)
    return rec


def build(prev=None, tails=None, learnings="", *, mt=0, memory="", workspace="/ws"):
    mp = parse(MP)
    plan = decompose(mp)
    return prompt.build(
        prompt.WorkerPrompt(
            mp=mp,
            plan=plan,
            task=plan.tasks[mt],
            iteration=2 if prev else 1,
            level=0,
            level_name="small",
            nonce="n0nce",
            workspace=workspace,
            checks=plan.checks_for(mp, mt),
            previous=prev,
            tails=tails or {},
            learnings=learnings,
            remaining=prompt.Remaining(7, 10, 100.0, 300.0, 2),
            memory=memory,
        )
    )


def test_the_first_prompt_holds_goal_task_checks_budget_and_the_nonce_protocol():
    text = build()
    assert "Build the thing." in text and 'Write "a" to `a.txt`.' in text
    assert "test -f a.txt" in text and "test -f b.txt" in text  # every check of the MP, in the shared part
    assert "## The checks that accept MT-001\n\ncheck-001\n" in text  # MT-002's check is not MT-001's
    assert "- MT-002: " in text and "- MT-002 (to do)" in text  # the other micro-task, as context
    assert "This is the first iteration" in text
    assert "7 of 10 iterations left" in text and "2 more failed iteration(s) at this level" in text
    assert "NONCE: n0nce" in text and "(none yet)" in text


def test_a_failed_claim_shows_the_failing_checks_output_tail_and_the_learnings():
    text = build(previous(claimed=True), {"check-1": "a.txt: No such file"}, ENTRY + "### MT-001 iteration 1: tried x")
    assert "It claimed completion, but the checks did not confirm it." in text
    assert "check-1 failed; the end of its output:" in text and "a.txt: No such file" in text
    assert "### MT-001 iteration 1: tried x" in text


def test_passing_checks_without_a_claim_ask_for_the_claim():
    text = build(previous(passed=["check-1"], failing=[], status_problem="no status block"))
    assert "Every check passed, but no completion was claimed" in text
    assert "Its status block was not accepted: no status block." in text
    assert "claimed completion, but" not in text


def test_the_budget_and_the_escalation_left_are_in_the_prompt():
    text = build()
    assert text.splitlines()[0] == "# Task from mp-engine: MP-9.1"
    assert "## Your micro-task now: MT-001\n\n(micro-task 1 of 2)\n" in text and "The repository: /ws" in text
    assert "## This iteration: 1 of MT-001, level 0 (small)" in text
    assert (
        "7 of 10 iterations left for the MP; 2 more failed iteration(s) at this level before escalation; "
        "about 100 of 300 seconds left."
    ) in text
    assert "This is the first iteration of this micro-task." in text


def test_a_later_micro_task_sees_only_the_checks_that_accept_it():
    mp = parse(MP)
    plan = decompose(mp)
    first = [c.step_id for c in plan.checks_for(mp, 0)]
    second = [c.step_id for c in plan.checks_for(mp, 1)]
    assert first == ["check-001"] and second == ["check-001", "check-002"]


def test_the_stable_parts_come_first_for_prompt_caching():
    """Everything up to the previous iteration's outcome is the same in every iteration of
    a micro-task (the learnings of earlier micro-tasks included); a failure that repeats
    keeps its output in the prefix too, and so do this micro-task's earlier learnings; the
    iteration's number, level, call outcome and budget come last."""
    earlier = "# Learnings\n\n<!-- entry: MT-000_iter-001 -->\nolder work\n"
    first = build(None, {}, earlier)
    second = build(
        previous(claimed=True),
        {"check-1": "a.txt: No such file"},
        earlier + "\n<!-- entry: MT-001_iter-001 -->\ntried x\n",
    )
    third = build(
        previous(claimed=True, iteration=2),
        {"check-1": "a.txt: No such file"},
        earlier + "\n<!-- entry: MT-001_iter-001 -->\ntried x\n\n<!-- entry: MT-001_iter-002 -->\ntried y\n",
    )
    stable = first[: first.index("## The previous iteration")]
    assert second.startswith(stable) and "NONCE: n0nce" in stable and "older work" in stable
    repeated = second[: second.index("tried x") + len("tried x")]
    assert "a.txt: No such file" in repeated and third.startswith(repeated)
    for changing in ("## This iteration", "## Remaining", "It claimed completion"):
        assert second.index(changing) > len(repeated)


def test_every_task_of_the_mp_starts_with_the_same_prefix():
    """Issue #34: the protocol, the goal, the memory, the list of tasks, every check and the
    learnings of earlier tasks come before anything one task adds, so the next task's (or a
    parallel task's, in another worktree) prompt reuses them from a prefix cache."""
    memory = "# Memory\n\n- check-001 (`pytest`): needs PYTHONPATH=src"
    log = "# Learnings\n\n<!-- entry: MT-001_iter-001 -->\nwrote a.txt\n"
    last_of_first = build(previous(claimed=True), {"check-1": "no a.txt"}, log, memory=memory)
    first_of_second = build(None, {}, log, mt=1, memory=memory, workspace="/ws/worktrees/MT-002")
    shared = last_of_first[: last_of_first.index("## Learnings so far")]
    assert first_of_second.startswith(shared)
    assert "needs PYTHONPATH=src" in shared and "test -f b.txt" in shared and "NONCE: n0nce" in shared
    assert "/ws" not in shared and "## Your micro-task now" not in shared  # nothing one task adds
    assert "wrote a.txt" in first_of_second[: first_of_second.index("## Your micro-task now")]


def test_the_first_and_second_iteration_share_the_learnings_heading():
    """No learnings file yet and a file with only its title read the same."""
    assert build() == build(learnings="# Learnings of MP-9.1\n\nOne entry per iteration.\n")


def test_a_metric_checks_goal_is_in_the_prompt():
    mp = parse(MP.replace(b"```bash\n# MT-002", b'```bash metric="coverage >= 0.9"\n# MT-002'))
    plan = decompose(mp)
    text = prompt.build(
        prompt.WorkerPrompt(
            mp=mp,
            plan=plan,
            task=plan.tasks[1],
            iteration=1,
            level=0,
            level_name="small",
            nonce="n",
            workspace="/ws",
            checks=plan.checks_for(mp, 1),
            previous=None,
            tails={},
            learnings="",
            remaining=prompt.Remaining(7, 10, 1.0, 3.0, 2),
        )
    )
    assert "check-002 (a goal: coverage >= 0.9, the number on the last line of its output):" in text
