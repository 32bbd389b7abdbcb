"""Tasks from a repository's own history: commits with code and tests together whose tests
fail before and pass at them; every other commit skipped with the reason."""

from __future__ import annotations

import json

import pytest

from mp_engine.core.errors import ConfigError
from mp_engine.eval.checkout import patch_paths
from mp_engine.eval.history import from_history, is_test
from mp_engine.eval.layout import EvalDir
from tests.gitutil import git

TEST = "bash {test}"


def commit(repo, message, files):
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path):
    """A shell project's history, oldest first: a root commit; a fix with a test that failed
    before it (the task); a refactoring whose test passed before too; docs alone; a change
    whose own test fails."""
    r = tmp_path / "shop"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    shas = {
        "root": commit(r, "price", {"price.sh": "echo 10\n", "tests/test_price.sh": 'test "$(bash price.sh)" = 10\n'}),
        "fix": commit(
            r,
            "Add the tax to the total\n\nThe total forgot the tax.",
            {
                "total.sh": "echo $(( $(bash price.sh) + 2 ))\n",
                "tests/test_total.sh": 'test "$(bash total.sh)" = 12\n',
                "tests/test_price.sh": 'test "$(bash price.sh)" = 10  # still\n',
            },
        ),
        "refactor": commit(
            r, "tidy", {"price.sh": "echo 10  # tidy\n", "tests/test_price.sh": 'test "$(bash price.sh)" -eq 10\n'}
        ),
        "docs": commit(r, "docs", {"README.md": "shop\n"}),
        "broken": commit(r, "break", {"total.sh": "echo 0\n", "tests/test_total.sh": 'test "$(bash total.sh)" = 13\n'}),
    }
    return r, shas


def test_only_a_commit_whose_tests_fail_before_and_pass_at_it_becomes_a_task(tmp_path, repo):
    r, shas = repo
    out = EvalDir(tmp_path / "out")
    said: list[str] = []
    tasks = from_history(r, out, since=None, count=5, test=TEST, setup="", say=said.append)
    (task,) = tasks.tasks
    assert task.instance_id == f"shop-{shas['fix'][:12]}" and task.base_commit == shas["root"]
    assert task.fail_to_pass == ("tests/test_total.sh",) and task.pass_to_pass == ("tests/test_price.sh",)
    assert task.problem_statement.startswith("Add the tax to the total\n\nThe total forgot the tax.")
    assert patch_paths(task.test_patch) == ["tests/test_price.sh", "tests/test_total.sh"]
    assert patch_paths(task.patch) == ["total.sh"]
    why = {s["commit"]: s["why"] for s in json.loads((out.root / "history.json").read_text())["skipped"]}
    assert why[shas["broken"]].startswith("its own tests do not pass at the commit")
    assert why[shas["docs"]] == "it does not change code and tests together"
    assert why[shas["refactor"]] == "its tests did not fail before it"
    assert why[shas["root"]] == "a root commit: there is no before"
    assert said == [f"history: {shas['fix'][:12]} is a task (1 failing test file(s) before it)"]


def test_the_selection_is_kept_for_a_resumed_eval_and_since_limits_it(tmp_path, repo):
    r, shas = repo
    out = EvalDir(tmp_path / "out")
    first = from_history(r, out, since=None, count=5, test=TEST, setup="", say=lambda _: None)
    git(r, "commit", "-q", "--allow-empty", "-m", "later")  # not looked at again: the kept selection
    assert from_history(r, out, since=None, count=5, test=TEST, setup="", say=lambda _: None).tasks == first.tasks
    with pytest.raises(ConfigError, match="no commit qualified"):
        from_history(r, out, since=shas["fix"], count=5, test=TEST, setup="", say=lambda _: None)


def test_a_directory_that_is_not_a_repository_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="not a git repository"):
        from_history(tmp_path, EvalDir(tmp_path / "o"), since=None, count=1, test=TEST, setup="", say=print)


@pytest.mark.parametrize(
    ("path", "test"),
    [
        ("tests/test_x.py", True),
        ("src/foo_test.go", True),
        ("web/app.test.js", True),
        ("spec/models/user_spec.rb", True),
        ("src/FooTest.java", True),
        ("src/latest.py", False),
        ("docs/testing.md", False),
        ("contest/solver.py", False),
    ],
)
def test_test_files_are_told_by_the_usual_conventions(path, test):
    assert is_test(path) is test
