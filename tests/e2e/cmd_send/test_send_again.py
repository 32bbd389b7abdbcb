"""End to end (issue #31's paper cuts): sending what the remote already has. An MP waiting
in the remote's inbox, or whose exact bytes already ran, is not sent again (exit 0, one line
saying so); `--rerun` runs it again on purpose; a cancel for a finished MP commits nothing;
`status --remote` of an idle engine does not read IDLE as an MP id."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.cmd_send.test_send import finish, send
from tests.gitutil import HELLO, engine_workspace, git, make_remote, remote_log

pytestmark = pytest.mark.daemon


def test_an_mp_already_waiting_in_the_inbox_is_not_sent_twice(tmp_path):
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    engine_workspace(tmp_path, url)  # no daemon: the MP stays waiting
    assert finish(send(tmp_path, HELLO, url, wait=False))[0] == 0
    before = git(bare, "rev-parse", "main")
    code, out, err = finish(send(tmp_path, HELLO, url, wait=False))
    assert code == 0, err
    assert "MP-0.1 is already waiting in the remote's inbox" in out and "nothing sent" in out
    assert "queued behind" not in err and "nothing to commit" not in out + err
    assert git(bare, "rev-parse", "main") == before


def test_an_mp_that_ran_runs_again_only_with_rerun(engine, tmp_path):
    bare, url, ws, d = engine
    assert finish(send(tmp_path, HELLO, url))[0] == 0
    before = remote_log(bare)
    code, out, err = finish(send(tmp_path, HELLO, url))
    assert code == 0, err
    assert "MP-0.1 already ran with these exact bytes" in out and "COMPLETED" in out and "--rerun" in out
    assert remote_log(bare) == before  # nothing committed, nothing run
    code, out, err = finish(send(tmp_path, HELLO, url, "--rerun"))
    assert code == 0 and "Status: COMPLETED" in out, err
    assert remote_log(bare)[:3] == ["MP-0.1: COMPLETED", "MP-0.1: RUNNING", "MP-0.1: send Hello over git"]

    cancel = [sys.executable, "-m", "mp_engine", "send", "--cancel", "MP-0.1", "--repo", url]
    before = remote_log(bare)
    done = subprocess.run(cancel, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "MP-0.1 already finished (COMPLETED" in done.stdout, done.stderr
    assert remote_log(bare) == before

    status = subprocess.run(
        [sys.executable, "-m", "mp_engine", "status", "--remote", url], capture_output=True, text=True, timeout=60
    )
    assert "doing:    the engine is ONLINE, idle" in status.stdout and "IDLE is not taken" not in status.stdout
