"""`mp-engine once`: one pass in a real process, the exit code saying what it did."""

from __future__ import annotations

import json

from tests.conftest import drop, read_state, result_field
from tests.e2e.cli import mpe
from tests.gitutil import clone, engine_workspace, git, make_remote, push_mp, remote_file, remote_log


def test_an_mp_runs_fails_holds_and_is_approved_through_the_inbox(ws):
    root = str(ws.root)
    assert mpe("once", "--root", root).returncode == 0  # nothing to do
    drop(ws, "# MP-3.1 Fails\n```bash\necho 'no such table' >&2; exit 2\n```\n")
    r = mpe("once", "--root", root)
    assert r.returncode == 1 and r.stdout.startswith("error MP-3.1: exit 2 in step 1")
    assert result_field(ws, "Status") == "ERROR" and result_field(ws, "Approve-With") == "Approves: MP-3.1"
    drop(ws, "# MP-3.2 Next\n```bash\ntrue\n```\n")
    held = mpe("once", "--root", root)
    assert held.returncode == 3 and "it has no `Approves:` header" in held.stdout
    drop(ws, "# MP-3.3 Fixed\nApproves: MP-3.1\n\n```bash\ntrue\n```\n")
    ok = mpe("once", "--root", root)
    # MP-3.2, held and then replaced, got its SUPERSEDED result on the way.
    assert ok.returncode == 0 and ok.stdout.strip() == "completed MP-3.3"
    assert read_state(ws)["last_completed"] == "MP-3.3" and read_state(ws).get("halt") is None
    superseded = [r for r in ws.runs_dir.glob("*MP-3.2*/result.json") if '"SUPERSEDED"' in r.read_text()]
    assert len(superseded) == 1


def test_an_invalid_mp_is_an_error_result_not_a_crash(ws):
    drop(ws, "MP-3.4 without the hash\n```bash\ntrue\n```\n")
    r = mpe("once", "--root", str(ws.root))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert result_field(ws, "Error-Kind") == "invalid_mp" and not ws.inbox_file.exists()


def test_once_on_a_git_workspace_leaves_the_remote_saying_offline(tmp_path):
    # issue #44: the pass's result commit said ONLINE, and its stop stayed local (OFFLINE, uncommitted).
    bare = make_remote(tmp_path)
    ws = engine_workspace(tmp_path, f"file://{bare}")
    root = str(ws.root)
    assert mpe("once", "--root", root).returncode == 0  # nothing to do: nothing committed
    assert remote_log(bare) == ["mp-engine: workspace layout"]
    push_mp(clone(f"file://{bare}", tmp_path / "orchestrator"), "# MP-3.5 Hello\n\n```bash\necho hi\n```\n")
    r = mpe("once", "--root", root)
    assert r.returncode == 0 and r.stdout.strip() == "completed MP-3.5", r
    pushed = json.loads(remote_file(bare, "SESSION_STATE.json"))
    assert (pushed["status"], pushed["last_completed"], pushed.get("daemon")) == ("OFFLINE", "MP-3.5", None)
    assert remote_log(bare)[0] == "mp-engine: engine stopped (OFFLINE)"
    assert git(ws.root, "status", "--porcelain", "--", "SESSION_STATE.json") == ""
