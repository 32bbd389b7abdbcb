"""What the result says of issue #42's gates (mp_engine/agent/run/limits.py); the runs that
fill it: tests/unit/agent/judge/test_protected.py and tests/unit/agent/call/test_budget.py."""

from __future__ import annotations

from types import SimpleNamespace

from mp_engine.agent.run.limits import budget, protected, sections


def state(*records):
    return SimpleNamespace(tasks=[SimpleNamespace(records=list(records))], usage=SimpleNamespace(cost=0.0))


def test_protected_lists_each_iteration_that_changed_what_judges_the_work():
    got = protected(
        state(
            {"mt": "MT-001", "iteration": 1, "protected": ["tests/t.py"]},
            {"mt": "MT-001", "iteration": 2},
            {"mt": "MT-001", "iteration": 3, "protected": [".github/workflows/ci.yml", "tests/t.py"]},
        )
    )
    assert got == {
        "paths": [".github/workflows/ci.yml", "tests/t.py"],
        "iterations": [
            {"mt": "MT-001", "iteration": 1, "paths": ["tests/t.py"]},
            {"mt": "MT-001", "iteration": 3, "paths": [".github/workflows/ci.yml", "tests/t.py"]},
        ],
    }
    assert protected(state({"mt": "MT-001", "iteration": 1})) is None


def test_without_budgets_or_protected_changes_the_result_says_nothing_of_them():
    assert budget(None, state()) is None and sections(None, None) == []
    spent = {"day": {"spent_usd": 2.0, "limit_usd": 1.0, "resets_at": "2026-04-06T00:00:00Z"}, "on_budget": "wait"}
    found = {"paths": ["a"], "iterations": [{"mt": "MT-001", "iteration": 1, "paths": ["a"]}]}
    titles = [s["title"] for s in sections(found, spent)]
    assert titles == ["Protected files", "Budgets"]
    assert "- day: $2.0000 of $1, resets 2026-04-06T00:00:00Z" in sections(None, spent)[0]["body"]
