"""A run on a configured repository (mp_engine/agent/run/repo.py): its work branch on the
repository's mirror, how it lands there (`branch`, `merge`), and the lease no push goes
out without (never over a person's work)."""

from __future__ import annotations

import json
from dataclasses import replace

from mp_engine.agent.run.repo import lease_for
from mp_engine.agent.run.workbranch import Where, WorkBranch
from tests.conftest import drop
from tests.unit.agent.run.repos import BRANCH, MP, engine, git, until_done


def work(ws) -> dict:
    return json.loads((ws.system_dir / "RESULT_last.json").read_text())


def no_forge(eng) -> None:
    eng.repos["app"] = replace(eng.repos["app"], forge=None)


def test_land_branch_leaves_the_verified_work_on_its_branch_of_the_repository(ws, tmp_path, monkeypatch):
    eng, forge, bare = engine(ws, tmp_path, monkeypatch, land="branch", forge="none", api_url="")
    no_forge(eng)
    drop(ws, MP)
    assert eng.tick().action == "completed", ws.result_file.read_text()
    tip = git(bare, "rev-parse", BRANCH)
    assert git(bare, "show", f"{tip}:hello.txt") == "hello"
    assert git(bare, "rev-parse", "main") != tip  # the base is untouched
    out = work(ws)
    assert out["work"]["how"] == "branch" and out["pull_request"] == {
        "repo": "app",
        "head": BRANCH,
        "base": "main",
        "head_sha": tip,
    }
    assert not (ws.root / "hello.txt").exists()  # the channel's repository has none of it


def test_land_merge_fast_forwards_the_base(ws, tmp_path, monkeypatch):
    eng, forge, bare = engine(ws, tmp_path, monkeypatch, land="merge", forge="none", api_url="")
    no_forge(eng)
    drop(ws, MP)
    assert eng.tick().action == "completed", ws.result_file.read_text()
    assert git(bare, "rev-parse", "main") == git(bare, "rev-parse", BRANCH)
    assert work(ws)["work"]["how"] == "fast-forward"


def test_the_lease_of_a_first_push_is_a_tip_the_work_contains_never_a_person_s(ws, tmp_path, monkeypatch):
    eng, forge, bare = engine(ws, tmp_path, monkeypatch)
    drop(ws, MP)
    until_done(eng, forge, bare)
    mirror = eng.repos["app"].mirror
    where = Where(mirror.git_dir, tmp_path / "trees", start=f"refs/heads/{BRANCH}")
    w = WorkBranch(eng.ws, "MP-41.2", "again", where=where)
    w.ensure(resumed=True)
    tip = git(w.path, "rev-parse", "HEAD")
    first = git(w.path, "rev-parse", "HEAD~1")
    assert lease_for(w, None, tip) is None  # absent: it must stay absent until the push
    assert lease_for(w, tip, tip) == tip and lease_for(w, first, tip) == first  # contained
    (w.path / "mine.txt").write_text("a person's\n")
    git(w.path, "add", "mine.txt")
    git(w.path, "-c", "user.name=P", "-c", "user.email=p@x", "commit", "-q", "-m", "theirs", "--", "mine.txt")
    theirs = git(w.path, "rev-parse", "HEAD")
    assert lease_for(w, theirs, tip) is None  # not contained: the push finds it there and stops
