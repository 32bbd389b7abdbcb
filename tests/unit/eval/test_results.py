"""results.jsonl: the truth a resumed eval starts from."""

from __future__ import annotations

from mp_engine.eval.results import Results


def row(config: str, iid: str, verdict: str = "resolved") -> dict:
    return {"config": config, "instance_id": iid, "verdict": verdict}


def test_a_judged_pair_is_kept_across_readers_and_never_added_twice(tmp_path):
    path = tmp_path / "results.jsonl"
    first = Results(path)
    first.add(row("a", "t1"))
    first.add(row("a", "t1", "unresolved"))  # a second verdict for the same pair is refused
    again = Results(path)
    assert again.judged("a", "t1") and not again.judged("b", "t1")
    assert [r["verdict"] for r in again.all()] == ["resolved"]
    assert len(path.read_text().splitlines()) == 1


def test_a_line_a_kill_cut_short_is_not_a_verdict_and_the_next_line_starts_afresh(tmp_path):
    path = tmp_path / "results.jsonl"
    Results(path).add(row("a", "t1"))
    with path.open("a") as f:
        f.write('{"config": "a", "instance_id": "t2", "verd')  # killed in the middle of the write
    cut = Results(path)
    assert cut.judged("a", "t1") and not cut.judged("a", "t2")
    cut.add(row("a", "t2"))
    assert Results(path).judged("a", "t2")
