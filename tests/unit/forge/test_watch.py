"""The pull requests this host watches for review (mp_engine/forge/watch.py): put by a run,
what was acted on or ignored kept across puts, dropped when the session ends."""

from __future__ import annotations

from mp_engine.forge.watch import Watched, WatchList

W = Watched("app", 7, "https://github.com/me/app/pull/7", "mp/MP-1", "main", "run-1", "MP-1", "t0", "a1", True, 0)


def test_a_put_is_read_back_and_a_later_put_keeps_what_was_seen(tmp_path):
    watch = WatchList.at(tmp_path)
    assert watch.all() == []
    watch.put(W)
    assert watch.all() == [W] and watch.get("app#7") == W
    watch.seen("app#7", ["comment:3"])
    watch.put(Watched(**{**W.__dict__, "sha": "b2", "review_rounds": 1, "acted": ("review:4",)}))
    (after,) = watch.all()
    assert after.sha == "b2" and after.review_rounds == 1 and after.acted == ("comment:3", "review:4")


def test_drop_ends_the_watch_and_a_broken_file_watches_nothing(tmp_path):
    watch = WatchList.at(tmp_path)
    watch.put(W)
    watch.drop("app#7")
    watch.drop("app#7")  # again: nothing to do
    assert watch.all() == []
    watch.path.write_text("{not json")
    assert watch.all() == []
    watch.path.write_text('{"app#1": {"repo": "app"}}')  # an entry of another version
    assert watch.all() == []
