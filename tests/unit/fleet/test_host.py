"""The worker's side of an attempt (mp_engine/fleet/host.py), without Temporal: a bare
remote holds the task's commit; the worker clones it, runs the fake agent of its own
level and the MP's checks in a worktree at that exact commit, pushes its work back, and
returns the outcome (redacted with the worker's secrets)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mp_engine.config.load import Config
from mp_engine.fleet.host import AttemptRefused, WorkerHost
from mp_engine.fleet.spec import AttemptSpec
from tests.agentutil import ONE, level
from tests.gitutil import git, make_remote

BRANCH = "mp-task/MP-3.2/MT-001"
PROMPT = 'NONCE: n1\n## Your micro-task now: MT-001\nWrite "hello" to `out/a.txt`.\n## Checks\n'


def remote_with_base(tmp_path: Path) -> tuple[str, str]:
    """A bare remote whose task branch holds one commit; (its URL, the commit)."""
    src = tmp_path / "src"
    src.mkdir()
    git(src, "init", "-q", "-b", "main")
    (src / "README.md").write_text("base\n")
    git(src, "add", "-A")
    git(src, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    url = f"file://{make_remote(tmp_path)}"
    git(src, "push", "-q", url, f"HEAD:refs/heads/{BRANCH}")
    return url, git(src, "rev-parse", "HEAD")


def spec(commit: str, **more) -> AttemptSpec:
    values = dict(
        attempt_id="mp-engine/R-MP-3.2/MT-001/1",
        mp_id="MP-3.2",
        run_id="R-MP-3.2",
        mt_id="MT-001",
        mt_index=0,
        iteration=1,
        level_name="fast",
        level_index=0,
        step_id="MT-001_iter-001",
        idempotency_key="k",
        prompt=PROMPT,
        mp_text=ONE,
        accepting=[0],
        branch=BRANCH,
        commit=commit,
        budget=60.0,
        queue="q",
        heartbeat_timeout=5,
        max_tries=2,
    )
    values.update(more)
    return AttemptSpec(**values)


def host(tmp_path: Path, url: str, *levels: dict) -> WorkerHost:
    config = Config.model_validate({"agent": {"levels": list(levels) or [level("fast", "good.py")]}})
    return WorkerHost(tmp_path / "worker", config, url, "w1@test")


def test_an_attempt_runs_the_workers_level_and_the_checks_and_pushes_its_work(tmp_path):
    url, base = remote_with_base(tmp_path)
    w = host(tmp_path, url)
    result = w.run(spec(base), threading.Event(), tries=1)
    assert result.call["kind"] == "ok" and result.worker == "w1@test" and result.tries == 1
    assert "---LOOPR_STATUS---" in result.stdout  # what the agent said, for the engine's judgement
    (check,) = result.checks
    assert check.ok and check.exit_code == 0 and check.index == 0 and check.step_id == "MT-001_iter-001_check-001"
    assert check.artifact["worker"] == "w1@test" and check.artifact["ok"] is True
    bare = Path(url.removeprefix("file://"))
    assert git(bare, "rev-parse", BRANCH) == result.commit != base
    assert git(bare, "rev-parse", f"{result.commit}^") == base  # the work, on the exact commit sent
    assert git(bare, "show", f"{result.commit}:out/a.txt") == "hello"
    w.settle()
    assert not any((tmp_path / "worker" / "work").iterdir())  # the attempt's worktree is gone, after


def test_a_failing_check_comes_back_with_its_output(tmp_path):
    url, base = remote_with_base(tmp_path)
    wrong = level("fast", "wrong.py")
    result = host(tmp_path, url, wrong).run(spec(base), threading.Event(), tries=1)
    (check,) = result.checks
    assert not check.ok and check.exit_code == 1 and check.artifact["diagnosis"]["summary"]


def test_a_level_the_worker_lacks_ends_the_attempt_with_the_fix(tmp_path):
    url, base = remote_with_base(tmp_path)
    result = host(tmp_path, url).run(spec(base, level_name="gpu-model"), threading.Event(), tries=1)
    assert result.call["kind"] == "not_found"
    assert "no agent level named 'gpu-model'" in result.call["detail"] and "[fleet] queues" in result.call["detail"]


@pytest.mark.parametrize(
    "field,value",
    [("commit", "--upload-pack=touch /tmp/pwned"), ("branch", "main"), ("branch", "mp-task/../x/y")],
)
def test_an_attempt_naming_no_engine_commit_or_branch_is_refused(tmp_path, field, value):
    url, base = remote_with_base(tmp_path)
    with pytest.raises(AttemptRefused, match="refused"):
        host(tmp_path, url).run(spec(**{"commit": base, field: value}), threading.Event(), tries=1)


def test_a_cancel_kills_the_agent_and_pushes_nothing(tmp_path):
    url, base = remote_with_base(tmp_path)
    log = tmp_path / "calls.jsonl"
    slow = level("fast", "good.py", "--sleep", "60", "--log", str(log))
    cancel = threading.Event()
    w = host(tmp_path, url, slow)
    done: list = []
    t = threading.Thread(target=lambda: done.append(w.run(spec(base), cancel, tries=1)))
    t.start()
    from tests.conftest import wait_for

    wait_for(lambda: log.exists() and log.read_text().strip(), timeout=30)
    cancel.set()
    t.join(60)
    assert done and done[0].call["kind"] == "interrupted" and done[0].commit == ""
    bare = Path(url.removeprefix("file://"))
    assert git(bare, "rev-parse", BRANCH) == base  # nothing pushed
