"""The engine's commits: named paths only, archives redacted, the operator's index kept."""

from __future__ import annotations

import pytest

import mp_engine.sync.commit as commit
from mp_engine.config.load import load_config
from mp_engine.sync.context import SyncContext
from mp_engine.sync.redact import Redactor
from mp_engine.sync.session import GitSession
from tests.gitutil import git


@pytest.fixture
def committer(channel):
    _bare, _url, ws, _orch = channel
    c = SyncContext(ws, load_config(ws.root).git, redact=Redactor(["s3cret-value"]))
    s = GitSession(ws.root, 30)
    yield ws, c, s
    s.close()


def test_archives_are_redacted_before_they_travel_and_the_mp_copy_is_not(committer):
    ws, c, s = committer
    run = ws.runs_dir / "20260101T000000Z-MP-1.0"
    (run / "steps").mkdir(parents=True)
    (run / "steps" / "step-001.stdout").write_text("token s3cret-value\n")
    (run / "incoming_microproject.txt").write_text("# MP-1.0 uses s3cret-value\n")
    rel = ws.rel(run)
    assert commit.commit_paths(c, s, "MP-1.0: COMPLETED", [rel], foreign_staged=False)
    assert git(ws.root, "show", f"HEAD:{rel}/steps/step-001.stdout") == "token [REDACTED]"
    assert git(ws.root, "show", f"HEAD:{rel}/incoming_microproject.txt") == "# MP-1.0 uses s3cret-value"


def test_only_the_named_paths_are_committed_and_a_staged_file_stays_staged(committer):
    ws, c, s = committer
    (ws.root / "mine.txt").write_text("the operator's\n")
    git(ws.root, "add", "mine.txt")
    (ws.root / "out.txt").write_text("the run's\n")
    assert commit.foreign_staged(s, ["out.txt"]) == ["mine.txt"]
    commit.commit_paths(c, s, "MP-1.1: COMPLETED", ["out.txt"], foreign_staged=True)
    assert git(ws.root, "show", "--name-only", "--format=", "HEAD") == "out.txt"
    assert "A  mine.txt" in git(ws.root, "status", "--porcelain")


def test_nothing_changed_is_no_commit(committer):
    ws, c, s = committer
    head = s.rev("HEAD")
    assert commit.commit_paths(c, s, "MP-1.2: COMPLETED", ["SESSION_STATE.json"], foreign_staged=False) is None
    assert commit.commit_paths(c, s, "MP-1.2: COMPLETED", [], foreign_staged=False) is None
    assert s.rev("HEAD") == head


def test_a_long_path_list_goes_through_a_pathspec_file(committer, monkeypatch):
    ws, c, s = committer
    monkeypatch.setattr(commit, "PATHS_ON_COMMAND_LINE", 10)
    for name in ("a.txt", "b.txt", ":(glob)*"):
        (ws.root / name).write_text(name)
    commit.commit_paths(c, s, "MP-1.3: COMPLETED", ["a.txt", "b.txt", ":(glob)*"], foreign_staged=False)
    assert sorted(git(ws.root, "show", "--name-only", "--format=", "HEAD").split()) == [":(glob)*", "a.txt", "b.txt"]


def test_commit_run_carries_the_runs_changes_and_drops_its_baseline(committer):
    import mp_engine.sync.attribution as attribution
    from tests.conftest import wait_for

    ws, c, s = committer
    (ws.root / "notes.txt").write_text("the operator's\n")
    data = c.store.load()
    data["baselines"]["r1"] = attribution.new_baseline(
        ws.local_dir, {"notes.txt": attribution.fingerprint(ws.root / "notes.txt")}
    )
    c.store.save(data)
    since = data["baselines"]["r1"]["since_ns"]
    wait_for(lambda: attribution.file_clock_ns(ws.local_dir) > since, what="the file clock to tick")
    (ws.root / "made.txt").write_text("by the run\n")
    head = commit.commit_run(c, s, "MP-1.4: COMPLETED", "r1", finished=True)
    assert head and sorted(git(ws.root, "show", "--name-only", "--format=", "HEAD").split()) == ["made.txt"]
    stored = c.store.load()
    assert "r1" not in stored["baselines"] and "notes.txt" in stored["dirty"]
