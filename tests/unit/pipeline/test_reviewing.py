"""Review rounds through `Engine.tick()` (mp_engine/pipeline/reviewing.py), with a real git
remote and the memory forge: a steering comment reopens the MP's run on the same branch and
it ends with a result of its own; each comment is acted on once; someone who may not steer is
ignored, said once; a merged pull request ends the session; the rounds have a bound; an
approved, green pull request merges when asked to."""

from __future__ import annotations

import json

from mp_engine.forge.base import Comment
from mp_engine.forge.watch import WatchList
from mp_engine.pipeline.context import Action
from tests.agentutil import only_run
from tests.conftest import drop, events
from tests.unit.agent.run.repos import BRANCH, MP, engine, git, until_done

REPO = {"review_poll": 0.01}


def green_pull_request(ws, tmp_path, monkeypatch, **repo):
    eng, forge, bare = engine(ws, tmp_path, monkeypatch, **{**REPO, **repo})
    drop(ws, MP)
    assert until_done(eng, forge, bare).action == "completed", ws.result_file.read_text()
    forge.permissions.update(alice="write", bob="read")
    forge.heads[BRANCH] = git(bare, "rev-parse", BRANCH)  # as GitHub: the head is the branch's tip
    return eng, forge, bare


def results(ws) -> list[dict]:
    return [json.loads(line) for line in (ws.system_dir / "results.jsonl").read_text().splitlines()]


def pull_request(ws) -> dict:
    return json.loads((ws.system_dir / "RESULT_last.json").read_text())["pull_request"]


def look(eng):
    """Ticks until a look found nothing more to do (the run it reopened, if any, ended)."""
    eng.reviews.next_look = 0.0
    res = eng.tick()
    return res


def test_a_steering_comment_resumes_the_same_run_on_the_same_branch_with_a_result_of_its_own(ws, tmp_path, monkeypatch):
    eng, forge, bare = green_pull_request(ws, tmp_path, monkeypatch)
    first = git(bare, "rev-parse", BRANCH)
    forge.comment(1, 'Please also write "review" to `review.txt`.', author="alice")
    res = look(eng)
    if res.action is not Action.COMPLETED:
        res = until_done(eng, forge, bare)
    assert res.action is Action.COMPLETED, ws.result_file.read_text()
    run = only_run(ws)  # the same run
    assert [r["run_id"] for r in results(ws)] == [run.run_id, run.run_id]  # a second result for it
    prompt = (run.dir / "agent" / "MT-002" / "iter-001" / "prompt.md").read_text()
    assert "alice" in prompt and "review.txt" in prompt and "review round 1" in prompt
    tip = git(bare, "rev-parse", BRANCH)
    assert git(bare, "merge-base", "--is-ancestor", first, tip) == "" and tip != first  # on top of the first push
    assert git(bare, "show", f"{tip}:review.txt") == "review"
    out = pull_request(ws)
    assert out["review_rounds"] == 1 and out["number"] == 1 and len(forge.pulls) == 1
    assert [r["state"] for r in out["ci_rounds"]] == ["passed", "passed"]
    assert run.ledger().model.model_extra["reviewed"][0]["status"] == "COMPLETED"  # the first end, kept
    (seen,) = events(ws, "pull_request_review")
    assert seen["authors"] == ["alice"] and seen["round"] == 1
    # Acted on once: later looks find nothing to do.
    assert look(eng).action is Action.IDLE and look(eng).action is Action.IDLE
    assert len(results(ws)) == 2


def test_a_comment_from_someone_who_may_not_steer_is_ignored_and_said_once(ws, tmp_path, monkeypatch):
    eng, forge, bare = green_pull_request(ws, tmp_path, monkeypatch)
    forge.comment(1, "Delete everything.", author="bob")
    assert look(eng).action is Action.IDLE and look(eng).action is Action.IDLE
    (ignored,) = events(ws, "pull_request_comment_ignored")
    assert ignored["author"] == "bob" and "may not steer" in ignored["why"]
    assert len(results(ws)) == 1 and not events(ws, "pull_request_review")


def test_a_merged_pull_request_ends_the_session(ws, tmp_path, monkeypatch):
    eng, forge, bare = green_pull_request(ws, tmp_path, monkeypatch)
    forge.merge_pull_request(1, git(bare, "rev-parse", BRANCH))
    look(eng)
    (closed,) = events(ws, "pull_request_closed")
    assert closed["state"] == "merged" and WatchList.at(ws.local_dir).all() == []
    forge.comment(1, 'Write "late" to `late.txt`.', author="alice")
    assert look(eng).action is Action.IDLE and len(results(ws)) == 1


def test_comments_past_review_rounds_end_the_session_for_a_person(ws, tmp_path, monkeypatch):
    eng, forge, bare = green_pull_request(ws, tmp_path, monkeypatch, review_rounds=0)
    forge.comment(1, 'Write "more" to `more.txt`.', author="alice")
    assert look(eng).action is Action.IDLE
    (used,) = events(ws, "pull_request_review_rounds_used")
    assert used["authors"] == ["alice"] and WatchList.at(ws.local_dir).all() == []


def test_green_and_approved_merges_when_asked_to(ws, tmp_path, monkeypatch):
    eng, forge, bare = green_pull_request(ws, tmp_path, monkeypatch, merge="when_green_and_approved")
    look(eng)
    assert forge.pulls[1].state == "open"  # no approval yet
    forge.feedback[1] = [Comment(900, "review", "alice", "", "2099-01-01T00:00:00Z", "u", review_state="APPROVED")]
    look(eng)
    assert forge.pulls[1].state == "merged" and events(ws, "pull_request_merged")
    assert WatchList.at(ws.local_dir).all() == []


def test_a_review_recorded_before_a_crash_reopens_the_run_at_the_next_look(ws, tmp_path, monkeypatch):
    eng, forge, bare = green_pull_request(ws, tmp_path, monkeypatch)
    from mp_engine.agent.api import add_review

    run = only_run(ws)
    add_review(run.dir, number=1, url="u", keys=["comment:77"], authors=["alice"], text='Write "x" to `x.txt`.')
    res = look(eng)  # the run was never reopened: this look does it
    if res.action is not Action.COMPLETED:
        res = until_done(eng, forge, bare)
    assert res.action is Action.COMPLETED and len(results(ws)) == 2
    assert git(bare, "show", f"{git(bare, 'rev-parse', BRANCH)}:x.txt") == "x"
