"""Reading the remote's cancel request while an MP runs, without the sync points' refs."""

from __future__ import annotations

import shutil

import pytest

from mp_engine.config.load import load_config
from mp_engine.sync.channel import GitChannel
from tests.gitutil import clone, engine_workspace, git, make_remote, push_file
from tests.unit.sync.test_signatures import keygen, sign_with

CANCEL = "Claude_Inbox/cancel_request.txt"


def channel(tmp_path, **settings):
    bare = make_remote(tmp_path)
    ws = engine_workspace(tmp_path, f"file://{bare}", **settings)
    orch = clone(f"file://{bare}", tmp_path / "orch")
    return ws, orch, GitChannel(ws, load_config(ws.root).git)


def test_the_remote_request_is_read_without_moving_any_ref_of_the_sync_points(tmp_path):
    ws, orch, ch = channel(tmp_path)
    assert ch.peek_cancel() is None
    refs_before = git(ws.root, "for-each-ref", "--format=%(refname) %(objectname)", "refs/remotes", "refs/heads")
    push_file(orch, CANCEL, "MP-1.1\n", "MP-1.1: cancel")
    assert ch.peek_cancel() == b"MP-1.1\n"
    assert ch.peek_cancel() == b"MP-1.1\n"  # the same tip: answered without a fetch
    assert (
        git(ws.root, "for-each-ref", "--format=%(refname) %(objectname)", "refs/remotes", "refs/heads") == refs_before
    )
    assert not (ws.root / CANCEL).exists()


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not installed")
def test_under_require_signed_an_unsigned_request_does_not_count(tmp_path):
    keys = tmp_path / "keys"
    keys.mkdir()
    trusted = keygen(keys, "orchestrator")
    signers = keys / "allowed_signers"
    signers.write_text(f"orchestrator@example {(keys / 'orchestrator.pub').read_text()}")
    ws, orch, ch = channel(tmp_path, require_signed=True, allowed_signers=str(signers))
    sign_with(orch, None)
    push_file(orch, CANCEL, "MP-2.1\n", "MP-2.1: cancel (unsigned)")
    assert ch.peek_cancel() is None
    sign_with(orch, trusted)
    git(orch, "rm", "--quiet", CANCEL)
    git(orch, "commit", "--quiet", "-m", "remove")
    push_file(orch, CANCEL, "MP-2.1\n", "MP-2.1: cancel (signed)")
    assert ch.peek_cancel() is None  # the unsigned commit is still in the range
