"""The eval's engine, in this process, with real `mp-engine once` children and a scripted
agent: each task's verdict exactly as scripted, the run archived in its workspace, and a
second run of the same eval judging nothing twice."""

from __future__ import annotations

import json

from mp_engine.core.exitcodes import ExitCode
from mp_engine.eval.driver import Eval, EvalScope
from mp_engine.eval.layout import EvalDir
from mp_engine.eval.manifest import begin
from mp_engine.eval.tasks import load_jsonl
from tests.evalutil import CALC_FIXED, CHEAT_TEST, calc_set, patcher_config, patches, rows, task_line, write_jsonl


def scope(tmp_path, tasks_file, configs, **kw) -> EvalScope:
    out = EvalDir(tmp_path / "out")
    tasks = load_jsonl(tasks_file)
    begin(out, tasks, configs)
    copies = {n: out.config(n) for n in configs}
    said: list[str] = []
    return EvalScope(out, tasks, copies, kw.pop("parallel", 2), said.append, **kw)


def test_each_task_is_judged_as_scripted_and_a_second_run_judges_nothing_again(tmp_path):
    tasks_file, repo, base = calc_set(tmp_path, ["solved", "unsolved", "cheater"])
    test_patch = json.loads(tasks_file.read_text().splitlines()[1])["test_patch"]
    with tasks_file.open("a") as f:  # a task whose environment cannot judge: a PASS_TO_PASS test is missing
        f.write(json.dumps(task_line("broken", base, test_patch, PASS_TO_PASS=["tests.test_gone.X.test_x"])) + "\n")
    script = patches(
        tmp_path / "p", repo, {"solved": {"calc.py": CALC_FIXED}, "cheater": {"tests/test_add.py": CHEAT_TEST}}
    )
    sc = scope(tmp_path, tasks_file, {"a": patcher_config(tmp_path / "a.toml", script)})
    assert Eval(sc).run() == ExitCode.OK
    got = {r["instance_id"]: r for r in rows(sc.out.root)}
    assert {k: r["verdict"] for k, r in got.items()} == {
        "solved": "resolved",
        "unsolved": "unresolved",  # it claimed completion: the claim does not count
        "cheater": "unresolved",  # it wrote where the hidden tests go: that does not help
        "broken": "env_error",
    }
    assert got["unsolved"]["certificate"] == "EXACT" and "run_id" not in got["broken"]  # no agent ran for it
    archive = sc.out.root / got["solved"]["archive"]
    assert json.loads((archive / "result.json").read_text())["status"] == "COMPLETED"
    assert "a + b" in (sc.out.run_dir("a", "solved") / "agent.patch").read_text()
    assert got["solved"]["time"]["run"] >= got["solved"]["agent_seconds"] and not got["solved"]["resumed"]
    again = Eval(sc)
    assert again.run() == ExitCode.OK and len(rows(sc.out.root)) == 4


def test_a_stopped_eval_starts_nothing_and_says_so(tmp_path):
    tasks_file, repo, _ = calc_set(tmp_path, ["t1"])
    sc = scope(tmp_path, tasks_file, {"a": patcher_config(tmp_path / "a.toml", patches(tmp_path / "p", repo, {}))})
    ev = Eval(sc)
    assert ev.checkpoint() == 0  # no child to ask
    assert ev.run() == ExitCode.INTERRUPTED and rows(sc.out.root) == []
    assert not sc.out.run_dir("a", "t1").exists()


def test_a_repository_that_cannot_be_had_is_an_env_error(tmp_path):
    tasks_file = write_jsonl(
        tmp_path / "s.jsonl",
        [{"repo": "gone", "url": "nowhere", "test": "true {tests}"}, task_line("t1", "0" * 40, "P", repo="gone")],
    )
    sc = scope(tmp_path, tasks_file, {"a": patcher_config(tmp_path / "a.toml", tmp_path)}, parallel=1)
    assert Eval(sc).run() == ExitCode.OK
    (only,) = rows(sc.out.root)
    assert only["verdict"] == "env_error" and "cannot be had" in only["why"]
