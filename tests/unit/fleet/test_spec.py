"""Attempt ids (mp_engine/fleet/spec.py): derived from run, task and iteration, so a
restarted engine finds the attempt it started; a run the engine gave back has its own."""

from mp_engine.fleet.spec import attempt_id, slug


def test_an_attempt_id_names_run_task_and_iteration_and_later_runs_are_numbered():
    assert attempt_id("20261126T0730Z-MP-2.1", "MT-002", 3) == "mp-engine/20261126T0730Z-MP-2.1/MT-002/3"
    assert attempt_id("R", "MT-001", 1, run=2) == "mp-engine/R/MT-001/1.2"
    assert attempt_id("R", "MT-001", 1, run=1) == attempt_id("R", "MT-001", 1)


def test_a_slug_is_a_safe_file_name():
    assert slug("mp-engine/R-MP-2.1/MT-002/1.2") == "mp-engine_R-MP-2.1_MT-002_1.2"
    assert "/" not in slug("../../etc/passwd") and not slug("../x").startswith(".")
