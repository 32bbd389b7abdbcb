"""What the channel tells `status`, and the signature verdict handed to the claim once."""

from __future__ import annotations

from mp_engine.config.load import load_config
from mp_engine.sync.channel import GitChannel
from tests.gitutil import git


def test_report_counts_unpushed_commits_and_shows_a_block(channel):
    _bare, _url, ws, _orch = channel
    ch = GitChannel(ws, load_config(ws.root).git)
    try:
        assert ch.report()["unpushed"] == 0
        (ws.root / "x.txt").write_text("x")
        git(ws.root, "add", "x.txt")
        git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "local")
        ch.sync.store.save(
            {**ch.sync.store.load(), "blocked": {"kind": "rewrite", "remote": "abc", "processed": "def"}}
        )
        report = ch.report()
        assert report["unpushed"] == 1 and report["blocked"]["kind"] == "rewrite"
        assert report["head"] == git(ws.root, "rev-parse", "HEAD")[:12]
    finally:
        ch.close()


def test_a_refusal_is_consumed_by_the_claim_of_that_exact_mp(channel):
    import hashlib

    _bare, _url, ws, _orch = channel
    ch = GitChannel(ws, load_config(ws.root).git)
    mp = b"# MP-3.3\n```bash\ntrue\n```\n"
    ch.sync.store.save(
        {**ch.sync.store.load(), "refusals": {hashlib.sha256(mp).hexdigest(): "commit abc is not signed"}}
    )
    assert ch.refusal_for(b"# MP-3.4 another\n") is None
    err = ch.refusal_for(mp)
    assert err is not None and "commit abc is not signed" in err.reason and "`git commit -S`" in err.fix
    assert ch.refusal_for(mp) is None  # consumed


def test_an_unreachable_remote_is_noted_once_and_the_poll_never_raises(channel, tmp_path):
    _bare, _url, ws, _orch = channel
    git(ws.root, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    ch = GitChannel(ws, load_config(ws.root).git)
    try:
        out = ch.poll()
        assert out.problem is None and ch.unreachable is not None
        first = ch.unreachable
        ch.poll()
        assert ch.unreachable == first
    finally:
        ch.close()


def test_a_session_that_saw_an_unexpected_error_is_dropped_and_reopened(channel):
    _bare, _url, ws, _orch = channel
    ch = GitChannel(ws, load_config(ws.root).git)
    try:
        with ch.session() as first:
            pass
        with ch.session() as same:
            assert same is first  # kept across sync points
        try:
            with ch.session():
                raise KeyError("a bug in a sync point")
        except KeyError:
            pass
        with ch.session() as fresh:
            assert fresh is not first and fresh.rev("HEAD") == git(ws.root, "rev-parse", "HEAD")
    finally:
        ch.close()


def test_running_without_commit_running_records_the_baseline_and_commits_nothing(channel, monkeypatch):
    _bare, _url, ws, _orch = channel
    monkeypatch.setenv("MP_ENGINE_GIT__COMMIT_RUNNING", "false")
    ch = GitChannel(ws, load_config(ws.root).git)
    try:
        head = git(ws.root, "rev-parse", "HEAD")
        assert ch.running("MP-3.5", "20260101T000000Z-MP-3.5").problem is None
        assert git(ws.root, "rev-parse", "HEAD") == head
        assert "20260101T000000Z-MP-3.5" in ch.sync.store.load()["baselines"]
    finally:
        ch.close()
