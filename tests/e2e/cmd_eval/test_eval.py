"""`mp-engine eval` as a real process (issue #43): task sets through the real pipeline with
scripted agents, the verdicts, counts and paired comparison exactly as scripted, the demo set,
a repository's own history, and `kill -9` in the middle of a run followed by the same command:
no task judged twice, none lost."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from mp_engine.core.lock import DaemonLock, daemon_owner
from mp_engine.core.pids import is_zombie, pid_alive
from mp_engine.core.workspace import Workspace
from mp_engine.eval.demo import demo_set
from tests.agentutil import FAKE
from tests.conftest import wait_for
from tests.e2e.cli import MP_ENGINE, mpe
from tests.evalutil import CALC_FIXED, CHEAT_TEST, calc_set, patcher_config, patches, rows
from tests.gitutil import git, toml_value


def report(out):
    return json.loads((out / "report.json").read_text())


def test_two_configurations_are_judged_and_compared_exactly_as_scripted(tmp_path):
    ids = [f"t{i}" for i in range(1, 7)]
    tasks, repo, _ = calc_set(tmp_path, ids)
    fix = {"calc.py": CALC_FIXED}
    strong = patches(tmp_path / "strong", repo, dict.fromkeys(ids[:5], fix))
    cheap = patches(tmp_path / "cheap", repo, {"t1": fix, "t2": fix, "t3": {"tests/test_add.py": CHEAT_TEST}})
    a = patcher_config(tmp_path / "cheap.toml", cheap)
    b = patcher_config(tmp_path / "strong.toml", strong, "--cost", "0.25")
    out = tmp_path / "out"
    r = mpe(
        "eval", str(tasks), "--config", str(a), "--config", str(b), "--parallel", "3", "--out", str(out), timeout=600
    )
    assert r.returncode == 0, r.stdout + r.stderr
    doc = report(out)
    c, s = doc["configs"]
    assert (c["name"], c["resolved"], c["judged"], s["name"], s["resolved"], s["judged"]) == (
        "cheap",
        2,
        6,
        "strong",
        5,
        6,
    )
    assert c["exact_unresolved"] == 4  # the cheat and the claims without a fix: the engine's checks passed
    assert s["cost_usd"] == 1.5 and s["cost_per_resolved"] == 0.3 and c["cost_usd"] is None
    (k,) = doc["comparisons"]
    assert (k["both"], k["only_a"], k["only_b"], k["neither"], k["p_value"]) == (2, 0, 3, 1, 0.25)
    assert "strong vs cheap: 3 resolved only by strong, 0 only by cheap of 6 paired (p = 0.25" in r.stdout
    assert len(rows(out)) == 12 and (out / "report.md").exists() and "<svg" in (out / "report.html").read_text()
    again = mpe("eval", str(tasks), "--config", str(a), "--config", str(b), "--out", str(out), timeout=300)
    assert again.returncode == 0 and "0 of 12 run(s) to go" in again.stdout and len(rows(out)) == 12


def test_the_demo_set_runs_with_only_python_bash_and_git(tmp_path):
    gold = tmp_path / "gold"
    gold.mkdir()
    for task in demo_set(tmp_path / "build").tasks:  # the scripted agent knows each reference fix
        (gold / f"{task.instance_id}.patch").write_text(task.patch)
    liar = tmp_path / "liar.toml"
    liar.write_text(
        f'[[agent.levels]]\nname = "liar"\nargv = {toml_value([str(FAKE / "liar.py"), "--prompt-file", "{prompt_file}"])}\n'
    )
    out = tmp_path / "out"
    r = mpe(
        "eval",
        "--demo",
        "--config",
        str(patcher_config(tmp_path / "gold.toml", gold)),
        "--config",
        str(liar),
        "--parallel",
        "2",
        "--out",
        str(out),
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    g, lie = report(out)["configs"]
    assert (g["resolved"], g["judged"], lie["resolved"], lie["judged"], lie["exact_unresolved"]) == (4, 4, 0, 4, 4)


def test_a_repository_s_own_history_becomes_tasks_its_commits_judge(tmp_path):
    shop = tmp_path / "shop"
    shop.mkdir()
    git(shop, "init", "-q", "-b", "main")
    files = {"price.sh": "echo 10\n", "tests/test_price.sh": 'test "$(bash price.sh)" = 10\n'}
    for message, change in (
        ("price", files),
        ("Add the tax", {"total.sh": "echo 12\n", "tests/test_total.sh": 'test "$(bash total.sh)" = 12\n'}),
    ):
        for name, text in change.items():
            (shop / name).parent.mkdir(parents=True, exist_ok=True)
            (shop / name).write_text(text)
        git(shop, "add", "-A")
        git(shop, "commit", "-qm", message)
    sha = git(shop, "rev-parse", "HEAD")
    fix = tmp_path / "fix"
    fix.mkdir()
    (fix / f"shop-{sha[:12]}.patch").write_text(
        subprocess.run(
            ["git", "show", "--format=", sha, "--", "total.sh"], cwd=shop, capture_output=True, text=True
        ).stdout
    )
    out = tmp_path / "out"
    r = mpe(
        "eval",
        "--from-history",
        str(shop),
        "-n",
        "3",
        "--test",
        "bash {test}",
        "--config",
        str(patcher_config(tmp_path / "a.toml", fix)),
        "--out",
        str(out),
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    (only,) = rows(out)
    assert (only["instance_id"], only["verdict"]) == (f"shop-{sha[:12]}", "resolved")
    assert f"history: {sha[:12]} is a task" in r.stdout


def test_killed_mid_run_the_same_command_goes_on_judging_nothing_twice_and_losing_nothing(tmp_path):
    tasks, repo, _ = calc_set(tmp_path, ["t1", "t2", "t3"])
    started, go = tmp_path / "started", tmp_path / "go"
    script = patches(tmp_path / "p", repo, {"t1": {"calc.py": CALC_FIXED}, "t3": {"calc.py": CALC_FIXED}})
    cfg = patcher_config(tmp_path / "a.toml", script, "--touch", str(started), "--wait-for", str(go))
    out = tmp_path / "out"
    args = [MP_ENGINE, "eval", str(tasks), "--config", str(cfg), "--out", str(out)]
    first = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for(started.exists, timeout=120, what="the first task's agent to start")
    first.kill()  # kill -9: the eval, not the `once` it started (its own session) nor the agent
    assert first.wait(30) == -signal.SIGKILL and rows(out) == []
    ws = Workspace.at(out / "work" / "a" / "t1")
    orphan = daemon_owner(ws.daemon_lock_file)["pid"]
    assert pid_alive(orphan)  # still running the task, holding its workspace
    second = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: not pid_alive(orphan) or is_zombie(orphan), timeout=120, what="the orphan to be cleared")
    go.touch()  # only now may the agent finish: the resumed run, not the orphan, does the work
    stdout, stderr = second.communicate(timeout=300)
    assert second.returncode == 0, stdout + stderr
    got = rows(out)
    assert sorted(r["instance_id"] for r in got) == ["t1", "t2", "t3"]  # each once: none lost, none twice
    verdicts = {r["instance_id"]: (r["verdict"], r["resumed"]) for r in got}
    assert verdicts == {"t1": ("resolved", True), "t2": ("unresolved", False), "t3": ("resolved", False)}
    assert "a t1: resumed" in stdout
    attempts = json.loads((out / "runs" / "a" / "t1" / "once.json").read_text())
    assert "ended" not in attempts[0] and attempts[1]["orphan"] == orphan


def test_usage_errors_are_refused_before_anything_starts(tmp_path):
    tasks, repo, _ = calc_set(tmp_path, ["t1"])
    cfg = patcher_config(tmp_path / "a.toml", tmp_path)
    none = mpe("eval", "--config", str(cfg), "--out", str(tmp_path / "o1"))
    assert none.returncode == 2 and "exactly one task set" in none.stderr
    both = mpe("eval", str(tasks), "--demo", "--config", str(cfg), "--out", str(tmp_path / "o2"))
    assert both.returncode == 2 and "exactly one task set" in both.stderr
    no_config = mpe("eval", str(tasks), "--root", str(tmp_path), "--out", str(tmp_path / "o3"))
    assert no_config.returncode == 2 and "give --config FILE" in no_config.stderr
    missing = tmp_path / "missing.toml"
    missing.write_text('[[agent.levels]]\nname = "x"\nargv = ["no-such-agent-cli", "{prompt_file}"]\n')
    unreachable = mpe("eval", str(tasks), "--config", str(missing), "--out", str(tmp_path / "o4"))
    assert unreachable.returncode == 2 and "not on PATH" in unreachable.stderr
    assert not (tmp_path / "o4" / "results.jsonl").exists()
    busy = DaemonLock(tmp_path / "o5" / "eval.lock")
    busy.acquire(mode="eval")  # another eval works in that directory
    try:
        taken = mpe("eval", str(tasks), "--config", str(cfg), "--out", str(tmp_path / "o5"))
    finally:
        busy.release()
    assert taken.returncode == 4 and "another `mp-engine eval` works in" in taken.stderr


def test_in_the_sandbox_the_agent_sees_neither_the_task_set_nor_the_eval_s_files(tmp_path):
    from mp_engine.execute.sandbox import problem

    if problem() is not None:
        pytest.skip(f"the sandbox cannot run here: {problem()}")
    tasks, repo, _ = calc_set(tmp_path, ["t1"])
    out = tmp_path / "out"
    peeks = [tasks, out / "tasks.jsonl", out / "probe" / "t1.json", out / "repos" / "calc.git" / "HEAD"]
    argv = [str(FAKE / "prowler.py"), "--prompt-file", "{prompt_file}", *(x for p in peeks for x in ("--read", str(p)))]
    cfg = tmp_path / "boxed.toml"
    cfg.write_text(f'[agent]\nsandbox = "os"\n\n[[agent.levels]]\nname = "prowler"\nargv = {toml_value(argv)}\n')
    r = mpe("eval", str(tasks), "--config", str(cfg), "--out", str(out), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (only,) = rows(out)
    assert only["verdict"] == "unresolved" and only["certificate"] == "EXACT"
    said = (out / only["archive"] / "agent" / "MT-001" / "iter-001" / "stdout.txt").read_text()
    attempts = [json.loads(line) for line in said.splitlines() if line.startswith('{"attempt"')]
    assert len(attempts) == len(peeks) and not any(a["ok"] for a in attempts), attempts
    assert all(p.exists() for p in peeks)  # they are there, outside the sandbox
