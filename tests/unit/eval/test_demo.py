"""The demo set shipped with mp-engine: each task builds the same repository everywhere, its
bug is real (the probe passes: the judging tests fail before any change), and its reference
fix resolves it while no change does not."""

from __future__ import annotations

import pytest

from mp_engine.eval.checkout import mirror
from mp_engine.eval.demo import demo_set, specs
from mp_engine.eval.judge import judge, probe
from mp_engine.eval.results import Verdict
from mp_engine.eval.testcmd import Shell

IDS = [s["instance_id"] for s in specs()]


def test_the_set_has_a_few_tasks_built_the_same_every_time(tmp_path):
    first, second = demo_set(tmp_path / "one"), demo_set(tmp_path / "two")
    assert [t.instance_id for t in first.tasks] == IDS and len(IDS) >= 4
    assert [t.base_commit for t in first.tasks] == [t.base_commit for t in second.tasks]
    assert demo_set(tmp_path / "one").digest() == first.digest()  # a resumed eval finds the same set
    for t in first.tasks:
        assert t.test_patch and t.patch and t.fail_to_pass and t.checks and "{test" in t.test


@pytest.mark.parametrize("iid", IDS)
def test_each_bug_is_real_and_its_fix_resolves_it(tmp_path, iid):
    (task,) = [t for t in demo_set(tmp_path / "demo").tasks if t.instance_id == iid]
    source = tmp_path / "m.git"
    base = mirror(task.url, source, task.base_commit)
    shell = Shell(tmp_path / "copy", tmp_path / "logs")
    assert probe(task, source, base, shell.cwd, shell).verdict == Verdict.RESOLVED  # the task can judge here
    fixed = judge(task, source, base, task.patch, shell.cwd, shell)
    assert fixed.verdict == Verdict.RESOLVED, fixed.why
