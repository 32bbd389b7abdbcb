"""gitsync.json: defaults for a missing or damaged file, compact writes."""

from __future__ import annotations

import json

from mp_engine.sync.store import SyncStore


def test_a_missing_or_damaged_store_reads_as_empty(tmp_path):
    store = SyncStore(tmp_path / ".engine" / "gitsync.json")
    assert store.load() == {"baselines": {}, "refusals": {}, "blocked": None}
    store.path.parent.mkdir()
    store.path.write_text("{torn")
    assert store.load()["baselines"] == {} and store.blocked() is None


def test_saved_data_reads_back_and_is_one_line(tmp_path):
    store = SyncStore(tmp_path / "gitsync.json")
    data = store.load()
    data["refusals"]["ab" * 32] = "commit 1234 is not signed"
    data["blocked"] = {"kind": "rewrite", "remote": "f00"}
    store.save(data)
    assert store.load() == data and store.blocked()["kind"] == "rewrite"
    text = store.path.read_text()
    assert text.count("\n") == 1 and json.loads(text) == data
