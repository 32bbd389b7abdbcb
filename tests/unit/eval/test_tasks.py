"""The task-set format (docs/EVAL.md): SWE-bench lines, repository lines, every error named
by its line with what to change."""

from __future__ import annotations

import json

import pytest

from mp_engine.eval.tasks import Task, TaskSet, TaskSetError, load_jsonl
from tests.evalutil import task_line, write_jsonl

REPO = {"repo": "calc", "url": "calc", "setup": "make", "test": "pytest {tests}", "checks": ["make check"]}


def test_a_swe_bench_line_takes_its_repository_s_commands_and_json_string_lists(tmp_path):
    path = write_jsonl(tmp_path / "set.jsonl", [REPO, task_line("t-1", "abc123", "PATCH")])
    (task,) = load_jsonl(path).tasks
    assert task.fail_to_pass == ("tests.test_add.AddTest.test_add",)  # from a JSON string
    assert task.pass_to_pass[0] == "tests.test_add.AddTest.test_zero"
    assert (task.setup, task.test, task.checks) == ("make", "pytest {tests}", ("make check",))
    assert task.url == str(tmp_path / "calc")  # relative to the set's file
    assert Task.from_json(json.loads(json.dumps(task.to_json()))) == task


def test_a_task_s_own_keys_win_and_a_version_line_applies_to_its_version_only(tmp_path):
    v2 = {"repo": "calc", "version": "2.0", "setup": "make v2"}
    rows = [REPO, v2, task_line("old", "a1", "P"), task_line("new", "a2", "P", version="2.0", test="tox -- {test}")]
    old, new = load_jsonl(write_jsonl(tmp_path / "s.jsonl", rows)).tasks
    assert (old.setup, new.setup) == ("make", "make v2")
    assert (old.test, new.test) == ("pytest {tests}", "tox -- {test}")


def test_a_remote_url_stays_as_given_and_github_is_the_default(tmp_path):
    rows = [{"repo": "psf/requests", "test": "pytest {tests}"}, task_line("r-1", "c0ffee", "P", repo="psf/requests")]
    (task,) = load_jsonl(write_jsonl(tmp_path / "s.jsonl", rows)).tasks
    assert task.url == "https://github.com/psf/requests.git"


@pytest.mark.parametrize(
    ("row", "said"),
    [
        ({"instance_id": "x"}, "`repo` is missing"),
        ({"FAIL_TO_PASS": "[]"}, "FAIL_TO_PASS is empty"),
        ({"FAIL_TO_PASS": "not json"}, "not a JSON list"),
        ({"PASS_TO_PASS": [1, 2]}, "must be a list of strings"),
        ({"instance_id": "../up"}, "instance_id '../up' must be"),
        ({"test": "pytest"}, "no test command with {tests} or {test}"),
    ],
)
def test_a_bad_line_is_refused_with_its_line_and_the_fix(tmp_path, row, said):
    line = {**task_line("t", "b", "P"), **row}
    if row == {"instance_id": "x"}:
        line = {"instance_id": "x"}
    path = write_jsonl(tmp_path / "s.jsonl", [REPO, line])
    with pytest.raises(TaskSetError, match="s.jsonl:2") as e:
        load_jsonl(path)
    assert said in str(e.value)


def test_duplicates_no_task_and_broken_json_are_refused(tmp_path):
    dup = write_jsonl(tmp_path / "d.jsonl", [REPO, task_line("t", "b", "P"), task_line("t", "c", "P")])
    with pytest.raises(TaskSetError, match="appears twice"):
        load_jsonl(dup)
    with pytest.raises(TaskSetError, match="holds no task"):
        load_jsonl(write_jsonl(tmp_path / "e.jsonl", [REPO]))
    (tmp_path / "b.jsonl").write_text('{"instance_id": \n')
    with pytest.raises(TaskSetError, match="b.jsonl:1: not a JSON object"):
        load_jsonl(tmp_path / "b.jsonl")
    with pytest.raises(TaskSetError, match="cannot read"):
        load_jsonl(tmp_path / "missing.jsonl")


def test_a_set_written_reads_back_the_same_and_its_digest_follows_its_content(tmp_path):
    ts = load_jsonl(write_jsonl(tmp_path / "s.jsonl", [REPO, task_line("t-1", "b", "P"), task_line("t-2", "b", "P")]))
    ts.write(tmp_path / "copy.jsonl")
    again = TaskSet.read(tmp_path / "copy.jsonl", "s")
    assert again.tasks == ts.tasks and again.digest() == ts.digest()
    assert TaskSet("s", ts.tasks[:1]).digest() != ts.digest()
