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


def test_an_outcome_with_many_long_check_outputs_fits_temporals_payload_limit():
    from mp_engine.fleet.spec import CHECK_CAP, PAYLOAD_BUDGET, AttemptResult, CheckOutcome

    checks = [CheckOutcome(k, f"s_check-{k}", False, 1, {}, "o" * CHECK_CAP, "e" * CHECK_CAP) for k in range(20)]
    fitted = AttemptResult({"kind": "ok"}, "w", 1, stdout="x" * 1000, checks=checks).fit()
    assert sum(len(c.stdout) + len(c.stderr) for c in fitted.checks) + 1000 <= PAYLOAD_BUDGET
    assert fitted.checks[0].stdout == "o" * 4096  # the tail is what is kept
    few = AttemptResult({"kind": "ok"}, "w", 1, checks=[CheckOutcome(0, "s", True, 0, {}, "o" * 10, "")]).fit()
    assert few.checks[0].stdout == "o" * 10
