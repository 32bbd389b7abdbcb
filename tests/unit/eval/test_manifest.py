"""What an eval is: a resumed eval must be the same task set under the same configurations."""

from __future__ import annotations

import json

import pytest

from mp_engine.core.errors import ConfigError
from mp_engine.eval.layout import EvalDir
from mp_engine.eval.manifest import begin, names
from mp_engine.eval.tasks import Task, TaskSet


def test_configurations_are_named_after_their_files(tmp_path):
    files = [tmp_path / "cheap.toml", tmp_path / "x" / "cheap.toml", tmp_path / "ws" / "mp-engine.toml"]
    assert list(names(files)) == ["cheap", "cheap-2", "ws"]


def test_the_first_run_copies_in_and_a_resume_must_match(tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text("[agent]\n")
    b.write_text("[agent]\nmax_iterations = 2\n")
    tasks = TaskSet("s", [Task("t", "r", "u", "c", "p", "P", ("f",))])
    out = EvalDir(tmp_path / "out")
    first = begin(out, tasks, {"b": b, "a": a})
    assert first["order"] == ["b", "a"] and out.config("a").read_text() == "[agent]\n"
    assert TaskSet.read(out.tasks, "s").tasks == tasks.tasks
    assert begin(out, tasks, {"b": b, "a": a})["began_at"] == first["began_at"]  # resumed
    a.write_text("[agent]\nmax_iterations = 9\n")
    with pytest.raises(ConfigError, match="other configurations"):
        begin(out, tasks, {"b": b, "a": a})
    other = TaskSet("s", [Task("t2", "r", "u", "c", "p", "P", ("f",))])
    with pytest.raises(ConfigError, match="another task set"):
        begin(out, other, {"b": b})
    assert json.loads(out.manifest.read_text())["tasks"] == 1
