"""The queue of MP versions the slot lost (inbox/queue.py)."""

from __future__ import annotations

import json

from mp_engine.inbox.queue import GIT, SEEN, SLOT, MPQueue


def test_entries_keep_their_order_and_bytes_and_survive_a_new_process(tmp_path):
    q = MPQueue(tmp_path / "queue")
    assert q.entries() == [] and len(q) == 0 and not (tmp_path / "queue").exists()
    a = q.add(b"# MP-1.1\n", GIT, commit="c1")
    b = q.add(b"# MP-1.2\n", SEEN)
    again = MPQueue(tmp_path / "queue")
    assert [(e.id, e.kind, e.commit) for e in again.entries()] == [(a.id, GIT, "c1"), (b.id, SEEN, None)]
    assert again.entries()[1].data() == b"# MP-1.2\n" and len(again) == 2
    again.remove(a.id)
    again.remove(a.id)  # idempotent
    assert [e.id for e in MPQueue(tmp_path / "queue").entries()] == [b.id]
    assert not (tmp_path / "queue" / f"{a.id}.mp").exists()


def test_a_commit_is_queued_once_even_after_it_left_the_queue(tmp_path):
    q = MPQueue(tmp_path)
    first = q.add(b"x", GIT, commit="c1")
    q.remove(first.id)
    assert q.add(b"x", GIT, commit="c1") is None and len(q) == 0
    # Two commits that set the same bytes are two MPs.
    assert q.add(b"x", GIT, commit="c2") and q.add(b"x", GIT, commit="c3") and len(q) == 2


def test_a_seen_version_is_not_queued_twice_and_takes_gits_kind(tmp_path):
    q = MPQueue(tmp_path)
    seen = q.add(b"same", SEEN)
    assert q.add(b"same", SEEN) is None
    assert q.add(b"same", SLOT, commit="head:slot") is None
    [entry] = q.entries()
    assert (entry.id, entry.kind, entry.commit) == (seen.id, SLOT, "head:slot")
    q.discard_seen(entry.sha256)  # not `seen` any more: kept
    assert len(q) == 1


def test_rollback_forgets_entries_and_their_commits(tmp_path):
    q = MPQueue(tmp_path)
    kept = q.add(b"kept", GIT, commit="c0")
    ids = [q.add(b"a", GIT, commit="c1").id, q.add(b"b", GIT, commit="c2").id]
    q.rollback(ids)
    assert [e.id for e in q.entries()] == [kept.id]
    assert q.add(b"a", GIT, commit="c1") is not None  # the next pull queues it again


def test_an_index_that_does_not_parse_starts_again_and_bytes_without_an_entry_are_swept(tmp_path):
    q = MPQueue(tmp_path)
    q.add(b"a", GIT, commit="c1")
    (tmp_path / "queue.json").write_text("{not json")
    (tmp_path / "000099.mp").write_bytes(b"orphan")  # a crash between the two writes
    fresh = MPQueue(tmp_path)
    assert fresh.entries() == []
    entry = fresh.add(b"b", SEEN)
    assert sorted(p.name for p in tmp_path.glob("*.mp")) == [f"{entry.id}.mp"]
    assert json.loads((tmp_path / "queue.json").read_text())["entries"][0]["sha256"] == entry.sha256
