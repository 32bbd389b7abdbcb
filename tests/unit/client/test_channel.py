"""The channel as the remote's tip shows it: the line for an idle engine (it is not an MP
id), what `Already` says, and a refusal that names only what its caller can do."""

from __future__ import annotations

from mp_engine.client.channel import Already, cannot_run, progress_line
from mp_engine.inbox.mpfile import parse


def test_an_idle_engine_is_not_read_as_an_mp_id():
    assert progress_line({"status": "ONLINE", "current": "IDLE"}) == "the engine is ONLINE, idle"
    assert "IDLE" not in progress_line({"status": "ONLINE", "current": "IDLE"})
    running = {"status": "RUNNING", "current": "MP-1.2", "run_id": "r1"}
    assert progress_line(running) == "MP-1.2 is RUNNING (run r1)"
    halted = {"status": "ERROR", "current": "MP-1.2", "halt": {"mp_id": "MP-1.2", "reason": "exit 3"}}
    assert progress_line(halted) == "the engine is halted on MP-1.2: exit 3"
    assert progress_line({"status": "ONLINE"}, "MP-2.0") == "MP-2.0 is not taken yet; the engine is ONLINE"


def test_already_says_what_is_there_and_how_to_run_it_again():
    assert "already waiting" in Already("waiting", "a" * 40).say("MP-1.0")
    ran = Already("ran", "b" * 40, {"run_id": "r1", "status": "COMPLETED"}).say("MP-1.0")
    assert "already ran" in ran and "r1: COMPLETED" in ran and "--rerun" in ran and "rerun=true" in ran
    done = Already("finished", "c" * 40, {"run_id": "r2", "status": "ERROR"}).say("MP-1.0")
    assert "already finished (ERROR" in done and "nothing to cancel" in done


def test_a_halt_refusal_offers_force_only_to_callers_that_have_it():
    state = {"halt": {"mp_id": "MP-1.0", "reason": "exit 3"}}
    mp = parse(b"# MP-1.1 Next\n\n```bash\ntrue\n```\n")
    assert "--force" in cannot_run(state, mp, "send it anyway with --force")
    without = cannot_run(state, mp, None)
    assert "--force" not in without and "anyway" not in without and "Approves: MP-1.0" in without
    approving = parse(b"# MP-1.1 Next\nApproves: MP-1.0\n\n```bash\ntrue\n```\n")
    assert cannot_run(state, approving, None) is None
