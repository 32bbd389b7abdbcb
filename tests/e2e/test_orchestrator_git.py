"""The real daemon against orchestrators that push with plain git, as real ones do: early,
in bursts, racing each other (issue #14). Every MP that arrives gets exactly one result,
in commit order, and the remote's results.jsonl and state say so."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.e2e.conftest import GIT_ENV
from tests.gitutil import clone, engine_workspace, git, make_remote, remote_file

pytestmark = pytest.mark.daemon

INBOX = "Claude_Inbox/incoming_microproject.txt"


def mp(mp_id: str, body: str = "true") -> str:
    return f"# {mp_id} From an orchestrator\n\n```bash\n{body}\necho {mp_id} >> order.txt\n```\n"


def commit_mp(repo: Path, text: str, message: str) -> None:
    (repo / INBOX).write_text(text)
    git(repo, "add", INBOX)
    git(repo, "commit", "-qm", message)


def push_with_retry(repo: Path) -> None:
    """`git pull --rebase` and push until it lands, as a script would."""
    for _ in range(20):
        if subprocess.run(["git", "push", "-q", "origin", "HEAD:main"], cwd=repo, capture_output=True).returncode == 0:
            return
        git(repo, "pull", "-q", "--rebase", "origin", "main")
    raise AssertionError("the orchestrator could not push")


def remote_index(bare: Path) -> list[tuple[str, str]]:
    text = remote_file(bare, "SYSTEM/results.jsonl") or ""
    return [(r["mp_id"], r["status"]) for r in map(json.loads, text.splitlines())]


def test_a_burst_pushed_while_one_runs_runs_in_commit_order_once_each(engine, tmp_path):
    bare, url, ws, d = engine
    orch = clone(url, tmp_path / "orch")
    flag = tmp_path / "go"
    commit_mp(orch, mp("MP-20.1", f"while [ ! -e {flag} ]; do sleep 0.05; done"), "MP-20.1")
    push_with_retry(orch)
    wait_for(lambda: json.loads(remote_file(bare, "SESSION_STATE.json"))["status"] == "RUNNING", what="RUNNING")
    git(orch, "pull", "-q", "--rebase", "origin", "main")
    for n in (2, 3, 4):  # three commits, one push, while MP-20.1 runs
        commit_mp(orch, mp(f"MP-20.{n}"), f"MP-20.{n}")
    push_with_retry(orch)
    flag.touch()
    wait_for(lambda: len(remote_index(bare)) == 4, timeout=60, what=f"four results; log:\n{d.output()[-3000:]}")
    assert remote_index(bare) == [(f"MP-20.{n}", "COMPLETED") for n in (1, 2, 3, 4)]
    assert (ws.root / "order.txt").read_text().split() == [f"MP-20.{n}" for n in (1, 2, 3, 4)]
    state = json.loads(remote_file(bare, "SESSION_STATE.json"))
    assert state["status"] == "ONLINE" and state.get("halt") is None and state["last_result"]["mp_id"] == "MP-20.4"
    assert remote_file(bare, INBOX) is None and "git_conflict" not in d.output()


def test_two_orchestrators_racing_both_get_their_result(engine, tmp_path):
    bare, url, ws, d = engine
    a, b = clone(url, tmp_path / "a"), clone(url, tmp_path / "b")
    commit_mp(a, mp("MP-21.1"), "from a")
    commit_mp(b, mp("MP-21.2"), "from b")
    push_with_retry(a)
    try:
        push_with_retry(b)  # rejected first; its pull --rebase conflicts on the inbox file
    except AssertionError:
        pass
    if (b / ".git" / "rebase-merge").exists() or (
        b / ".git" / "rebase-apply"
    ).exists():  # resolve as an orchestrator does: ours is newer
        (b / INBOX).write_text(mp("MP-21.2"))
        git(b, "add", INBOX)
        subprocess.run(
            ["git", "-c", "core.editor=true", "rebase", "--continue"], cwd=b, check=True, capture_output=True
        )
        push_with_retry(b)
    wait_for(lambda: len(remote_index(bare)) == 2, timeout=60, what=f"two results; log:\n{d.output()[-3000:]}")
    assert sorted(remote_index(bare)) == [("MP-21.1", "COMPLETED"), ("MP-21.2", "COMPLETED")]
    assert json.loads(remote_file(bare, "SESSION_STATE.json"))["status"] == "ONLINE"


def test_a_5_mb_output_against_a_1_mib_hook_reaches_the_remote_without_the_big_file(tmp_path, daemon_factory):
    """The real daemon, a step printing 5 MB, a remote whose pre-receive hook refuses blobs
    over 1 MiB: the result is pushed (the output stays on the host), nothing retries."""
    from tests.unit.sync.test_size_cap import BIG, LIMIT_HOOK

    bare = make_remote(tmp_path)
    (bare / "hooks" / "pre-receive").write_text(LIMIT_HOOK)
    (bare / "hooks" / "pre-receive").chmod(0o755)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url)
    d = daemon_factory(ws.root, env=GIT_ENV).start()
    orch = clone(url, tmp_path / "orch")
    commit_mp(orch, BIG, "a loud MP")
    push_with_retry(orch)
    wait_for(
        lambda: remote_index(bare) == [("MP-9.1", "COMPLETED")], timeout=60, what=f"the result; {d.output()[-2000:]}"
    )
    last = json.loads(remote_file(bare, "SYSTEM/RESULT_last.json"))
    assert any("max_file_bytes" in n and "5,000,000 bytes" in n for n in last["notes"])
    assert "sync_push_refused" not in d.output()
    d.signal(signal.SIGTERM)
    d.wait()
