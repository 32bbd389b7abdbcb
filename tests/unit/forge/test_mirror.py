"""Mirrors and worktrees of configured repositories (mp_engine/forge/mirror.py), against a
real git remote over smart HTTP on loopback that wants a token, as GitHub does."""

from __future__ import annotations

import base64
import subprocess

import pytest

from mp_engine.config.repos import RepoConfig
from mp_engine.core import gitcmd
from mp_engine.core.errors import BranchMissing, BranchMoved, CredentialsRefused, GitConfigChanged
from mp_engine.forge.credentials import Token
from mp_engine.forge.mirror import RepoMirror
from tests.forge.githttp import GitHttp
from tests.gitutil import git


@pytest.fixture
def remote(tmp_path, token):
    served = GitHttp(tmp_path / "served", token)
    (tmp_path / "served").mkdir()
    served.bare("app")
    yield served
    served.close()


@pytest.fixture
def mirror(tmp_path, remote, token):
    repo = RepoConfig(url=f"{remote.url}/app.git", land="branch", forge="none")
    return RepoMirror(tmp_path / "ws" / "SYSTEM" / ".engine" / "repos", "app", repo, Token(token, "APP_PAT"))


def commit(worktree, name: str, text: str) -> str:
    (worktree / name).write_text(text)
    git(worktree, "add", name)
    git(worktree, "commit", "-q", "-m", f"add {name}")
    return git(worktree, "rev-parse", "HEAD").strip()


def remote_tip(remote, branch: str) -> str:
    return git(remote.root / "app.git", "rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False).strip()


def test_the_mirror_fetches_with_the_token_on_the_first_request(mirror, remote):
    branches = mirror.fetch()
    assert list(branches) == ["main"] and branches["main"] == remote_tip(remote, "main")
    assert (mirror.home / "mirror.git" / "HEAD").is_file()
    assert remote.seen and all(auth == remote.expected for _, auth in remote.seen), "no request went without it"


def test_a_run_works_in_its_own_worktree_and_pushes_its_branch_under_a_lease(mirror, remote):
    mirror.fetch()
    start = mirror.start_point("mp/MP-1.2", "main")
    assert start == "refs/remotes/origin/main"
    work = mirror.worktree("run-1", "mp/MP-1.2", start)
    assert work == mirror.home / "work" / "run-1" and (work / "README.md").is_file()
    first = commit(work, "a.txt", "a\n")
    assert mirror.push(work, "mp/MP-1.2", None) == first == remote_tip(remote, "mp/MP-1.2")
    second = commit(work, "b.txt", "b\n")
    assert mirror.push(work, "mp/MP-1.2", first) == second == remote_tip(remote, "mp/MP-1.2")
    assert mirror.branches()["mp/MP-1.2"] == second


def test_a_person_s_push_onto_the_work_branch_is_noticed_and_never_overwritten(mirror, remote, tmp_path):
    mirror.fetch()
    work = mirror.worktree("run-1", "mp/MP-1.2", mirror.start_point("mp/MP-1.2", "main"))
    ours = commit(work, "a.txt", "a\n")
    mirror.push(work, "mp/MP-1.2", None)
    person = tmp_path / "person"
    git(tmp_path, "clone", "-q", "-b", "mp/MP-1.2", str(remote.root / "app.git"), str(person))
    theirs = commit(person, "theirs.txt", "mine\n")
    git(person, "push", "-q", "--force", "origin", "HEAD:mp/MP-1.2")
    commit(work, "b.txt", "b\n")
    with pytest.raises(BranchMoved, match="someone else pushed"):
        mirror.push(work, "mp/MP-1.2", ours)
    assert remote_tip(remote, "mp/MP-1.2") == theirs
    with pytest.raises(BranchMoved):  # a new branch the engine thinks absent, which a person made meanwhile
        mirror.push(work, "mp/MP-1.2", None)


def test_a_restarted_run_finds_its_worktree_and_the_next_round_starts_from_the_pushed_branch(mirror, remote):
    mirror.fetch()
    work = mirror.worktree("run-1", "mp/MP-1.2", mirror.start_point("mp/MP-1.2", "main"))
    pushed = commit(work, "a.txt", "a\n")
    mirror.push(work, "mp/MP-1.2", None)
    (work / "unfinished.txt").write_text("the agent was here\n")
    assert mirror.worktree("run-1", "mp/MP-1.2", "refs/remotes/origin/main") == work
    assert (work / "unfinished.txt").is_file()
    mirror.remove("run-1")
    assert not work.exists()
    mirror.fetch()
    assert mirror.start_point("mp/MP-1.2", "main") == "refs/remotes/origin/mp/MP-1.2"
    again = mirror.worktree("run-2", "mp/MP-1.2", mirror.start_point("mp/MP-1.2", "main"))
    assert git(again, "rev-parse", "HEAD").strip() == pushed


def test_a_base_the_remote_does_not_have_is_refused_with_the_fix(mirror):
    mirror.fetch()
    with pytest.raises(BranchMissing, match="has no branch 'develop'.*its branches: main.*`Base:`"):
        mirror.start_point("mp/MP-1.2", "develop")


def test_a_changed_mirror_config_stops_the_engine_s_git_there(mirror):
    mirror.fetch()
    with open(mirror.git_dir / "config", "a") as f:
        f.write('[url "https://evil.example/"]\n\tinsteadOf = http://127.0.0.1\n')
    with pytest.raises(GitConfigChanged, match="insteadOf"):
        mirror.fetch()


def test_a_wrong_token_fails_without_saying_it(tmp_path, remote):
    repo = RepoConfig(url=f"{remote.url}/app.git", land="branch", forge="none")
    wrong = RepoMirror(tmp_path / "repos", "app", repo, Token("github_pat_not-the-one", "APP_PAT"))
    with pytest.raises(
        CredentialsRefused, match="refused the engine's credentials.*token_env names must be valid"
    ) as info:
        wrong.fetch()
    assert "not-the-one" not in str(info.value)


def test_the_token_is_never_on_a_command_line_in_a_file_or_in_the_environment(mirror, remote, token, monkeypatch):
    spawned = []
    real = subprocess.Popen

    def spy(argv, *args, **kwargs):
        spawned.append((list(argv), dict(kwargs.get("env") or {})))
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(gitcmd.subprocess, "Popen", spy)
    mirror.fetch()
    work = mirror.worktree("run-1", "mp/MP-1.2", mirror.start_point("mp/MP-1.2", "main"))
    commit(work, "a.txt", "a\n")
    mirror.push(work, "mp/MP-1.2", None)
    forms = {token, base64.b64encode(f"x-access-token:{token}".encode()).decode()}
    remote_calls = [env for argv, env in spawned if {"fetch", "push"} & set(argv)]
    assert len(remote_calls) == 2 and all(any(f in v for v in env.values() for f in forms) for env in remote_calls)
    local_calls = [env for argv, env in spawned if not {"fetch", "push"} & set(argv)]
    assert local_calls and not any(f in v for env in local_calls for v in env.values() for f in forms)
    assert not any(f in " ".join(argv) for argv, _ in spawned for f in forms)
    assert not any(f in v for v in __import__("os").environ.values() for f in forms)
    for path in mirror.home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(f.encode() in data for f in forms), path
            assert b"extraheader" not in data.lower(), path
