"""Bounded result commits and pushes the remote refuses for good (issue #14, item 3),
against a real bare remote whose pre-receive hook rejects blobs over 1 MiB."""

from __future__ import annotations

from mp_engine.commands.doctor.run import run_checks
from mp_engine.commands.status import render_status
from mp_engine.config.load import load_config
from mp_engine.sync.size_cap import oversized
from mp_engine.views.status import status_report
from tests.conftest import events, read_state
from tests.gitutil import engine_workspace, git, make_engine, make_remote, push_file, push_mp, remote_file, sync_tick

LIMIT_HOOK = r"""#!/bin/sh
# Refuse any blob over 1 MiB, as GitHub refuses files over 100 MB.
zero=0000000000000000000000000000000000000000
while read old new ref; do
  if [ "$old" = "$zero" ]; then range="$new"; else range="$old..$new"; fi
  git rev-list --objects $range | git cat-file --batch-check='%(objecttype) %(objectsize) %(rest)' |
    awk '$1 == "blob" && $2 > 1048576 { print "error: " $3 " is " $2 " bytes, over the 1 MiB limit"; bad = 1 }
         END { exit bad }' >&2 || exit 1
done
"""
BIG = "# MP-9.1 Loud\n\n```bash\nhead -c 5000000 /dev/zero | tr '\\0' x\n```\n"


def limited_remote(tmp_path, **settings):
    bare = make_remote(tmp_path)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(LIMIT_HOOK)
    hook.chmod(0o755)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url, **settings)
    orch = tmp_path / "orch"
    git(tmp_path, "clone", "-q", url, str(orch))
    return bare, ws, orch


def test_a_5_mb_output_stays_on_the_host_and_the_result_says_so(tmp_path):
    bare, ws, orch = limited_remote(tmp_path)
    engine = make_engine(ws)
    push_mp(orch, BIG)
    assert sync_tick(engine).action == "completed"
    [run] = [p for p in ws.runs_dir.iterdir() if p.is_dir()]
    stdout = f"SYSTEM/runs/{run.name}/steps/step-001.stdout"
    assert (ws.root / stdout).stat().st_size == 5_000_000  # kept whole on the host
    assert remote_file(bare, stdout) is None  # not committed
    pushed = remote_file(bare, "SYSTEM/RESULT_last.md")
    assert "Status: COMPLETED" in pushed and f"`{stdout}` (5,000,000 bytes)" in pushed
    assert "max_file_bytes" in pushed and len(pushed.encode()) <= 64 * 1024
    assert not events(ws, "sync_push_refused") and events(ws, "sync_file_held_back")[0]["files"] == [stdout]
    # The next MP's commit leaves the big file alone, and its result does not repeat the note.
    push_mp(orch, "# MP-9.2 Quiet\n\n```bash\necho quiet\n```\n")
    assert sync_tick(engine).action == "completed"
    assert "max_file_bytes" not in remote_file(bare, "SYSTEM/RESULT_last.md")
    assert len(events(ws, "sync_file_held_back")) == 1
    assert git(ws.root, "rev-parse", "HEAD") == git(bare, "rev-parse", "main")


def test_a_file_the_mp_creates_above_the_cap_is_not_committed(tmp_path):
    bare, ws, orch = limited_remote(tmp_path)
    engine = make_engine(ws)
    push_mp(
        orch,
        "# MP-9.3 Artifact\n\n```bash\nmkdir -p out && head -c 2000000 /dev/zero > out/blob.bin\n"
        "echo small > out/small.txt\n```\n",
    )
    assert sync_tick(engine).action == "completed"
    assert remote_file(bare, "out/small.txt") == "small\n" and remote_file(bare, "out/blob.bin") is None
    assert "`out/blob.bin` (2,000,000 bytes)" in remote_file(bare, "SYSTEM/RESULT_last.md")
    assert (ws.root / "out/blob.bin").exists()


def test_a_refused_push_is_not_retried_and_is_reported_everywhere(tmp_path):
    """With no cap the 5 MB output is committed; the hook refuses it. The engine stops
    pushing (no retry loop), says why in status, doctor and the next result, keeps
    serving MPs, and tries again when the remote moves or the engine restarts."""
    bare, ws, orch = limited_remote(tmp_path, max_file_bytes=0)
    engine = make_engine(ws)
    push_mp(orch, BIG)
    assert sync_tick(engine).action == "completed"
    [refused] = events(ws, "sync_push_refused")
    assert "over the 1 MiB limit" in refused["message"] and "pre-receive hook declined" in refused["message"]
    report = status_report(ws, load_config(ws.root))
    assert "push refused by the remote: " in render_status(report) and "over the 1 MiB limit" in render_status(report)
    [push_check] = [c for c in run_checks(ws.root) if c.name == "git push"]
    assert push_check.level == "fail" and "push refused by the remote" in push_check.message
    # Not retried at each poll: the remote has not moved.
    for _ in range(3):
        assert sync_tick(engine).action == "idle"
    assert len(events(ws, "sync_push_refused")) == 1
    # The engine keeps serving what it can: a local MP runs, its result says where it is.
    ws.inbox_file.write_text("# MP-9.4 Local\n\n```bash\necho local\n```\n")
    engine.inbox.settle = 0
    assert engine.tick().action == "completed"
    assert "Git: push refused by the remote" in ws.result_file.read_text()
    assert read_state(ws)["status"] == "ONLINE"
    # The remote moves: the push is tried again (and refused again: same commits).
    push_file(orch, "notes.txt", "x\n", "orchestrator moves the branch")
    sync_tick(engine)
    assert len(events(ws, "sync_push_refused")) == 2
    # The operator lifts the limit and restarts: everything is pushed.
    (bare / "hooks" / "pre-receive").unlink()
    engine.shutdown()
    restarted = make_engine(ws)
    sync_tick(restarted)
    assert git(ws.root, "rev-parse", "HEAD") == git(bare, "rev-parse", "main")
    assert "Status: COMPLETED" in remote_file(bare, "SYSTEM/RESULT_last.md")


def test_oversized_walks_new_directories_and_skips_links(tmp_path):
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "e" / "big").write_bytes(b"x" * 11)
    (tmp_path / "d" / "small").write_bytes(b"x" * 3)
    (tmp_path / "top").write_bytes(b"x" * 20)
    (tmp_path / "link").symlink_to(tmp_path / "top")
    assert oversized(tmp_path, ["d", "top", "link", "missing"], 10) == {"d/e/big": 11, "top": 20}


def test_a_held_back_output_is_not_read_for_redaction_and_a_committed_one_is_masked(tmp_path):
    """Redaction is for what travels: the 5 MB output stays on the host as it was written
    (same inode, token and all); the small stderr beside it is masked before the commit."""
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    bare, ws, orch = limited_remote(tmp_path)
    engine = make_engine(ws)
    push_mp(
        orch, f"# MP-9.5 Loud\n\n```bash\nhead -c 5000000 /dev/zero | tr '\\0' x\necho {token}\necho {token} >&2\n```\n"
    )
    assert sync_tick(engine).action == "completed"
    [run] = [p for p in ws.runs_dir.iterdir() if p.is_dir()]
    stdout, stderr = run / "steps" / "step-001.stdout", f"SYSTEM/runs/{run.name}/steps/step-001.stderr"
    assert stdout.read_text().endswith(f"{token}\n")  # untouched: never read, never rewritten
    assert remote_file(bare, stderr) == "[REDACTED]\n" and (ws.root / stderr).read_text() == "[REDACTED]\n"
