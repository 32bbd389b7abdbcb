"""GitSession's queries against a real repository."""

from __future__ import annotations

import os

import pytest

from mp_engine.core.errors import SyncError
from mp_engine.sync.session import GitSession
from tests.gitutil import git


@pytest.fixture
def s(tmp_path):
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "a.txt").write_bytes(b"exact\r\nbytes\n")
    git(tmp_path, "add", "a.txt")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    session = GitSession(tmp_path, 30)
    yield session
    session.close()


def test_blob_returns_the_exact_bytes(s):
    assert s.blob("HEAD", "a.txt") == b"exact\r\nbytes\n"
    assert s.blob("HEAD", "missing.txt") is None


def test_update_refs_is_one_transaction(s, tmp_path):
    head = s.rev("HEAD")
    s.update_refs({"refs/mp-engine/a": head, "refs/mp-engine/b": head})
    assert git(tmp_path, "rev-parse", "refs/mp-engine/a") == git(tmp_path, "rev-parse", "refs/mp-engine/b") == head
    with pytest.raises(SyncError):  # one bad ref: neither is moved
        s.update_refs({"refs/mp-engine/a": "1" * 40, "refs/mp-engine/c": head})  # no such object
    assert s.rev("refs/mp-engine/a") == head and s.rev("refs/mp-engine/c") is None


def test_staged_and_identity(s, tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)  # a host where nobody set an identity
    assert s.staged() == []
    (tmp_path / "b.txt").write_text("b")
    git(tmp_path, "add", "b.txt")
    assert s.staged() == ["b.txt"]
    assert s.identity() == ["-c", "user.name=mp-engine", "-c", "user.email=mp-engine@localhost"]


def test_not_a_repository_says_how_to_make_one(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(SyncError, match="mp-engine init --remote"):
        GitSession(tmp_path / "plain", 30)
