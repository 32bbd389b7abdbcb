"""The next step of one (configuration, task) pair, from the facts alone."""

from __future__ import annotations

from mp_engine.eval.phases import MAX_FAILED_RUNS, Facts, Phase, next_phase, pairs, pending

READY = Facts(probed=True, probe_ok=True)


def test_the_phases_follow_the_eval_s_order():
    assert next_phase(Facts()) == Phase.PROBE
    assert next_phase(Facts(probed=True)) == Phase.SKIP_ENV  # the environment failed: no agent runs
    assert next_phase(READY) == Phase.PREPARE
    assert next_phase(Facts(probed=True, probe_ok=True, prepared=True)) == Phase.RUN
    assert next_phase(Facts(probed=True, probe_ok=True, prepared=True, has_result=True)) == Phase.JUDGE


def test_judged_is_done_even_when_stopping_and_stopping_starts_nothing_else():
    assert next_phase(Facts(judged=True, stopping=True)) == Phase.DONE
    assert next_phase(Facts(stopping=True, probed=True, probe_ok=True, prepared=True)) == Phase.STOP


def test_a_run_that_keeps_ending_without_a_result_is_given_up():
    stuck = Facts(probed=True, probe_ok=True, prepared=True, failed_runs=MAX_FAILED_RUNS)
    assert next_phase(stuck) == Phase.GIVE_UP
    assert next_phase(Facts(probed=True, probe_ok=True, prepared=True, failed_runs=1)) == Phase.RUN
    assert next_phase(Facts(probed=True, probe_ok=True, has_result=True, failed_runs=5)) == Phase.JUDGE


def test_the_pairs_go_task_by_task_and_only_the_unjudged_remain():
    all_pairs = pairs(["a", "b"], ["t1", "t2"])
    assert all_pairs == [("a", "t1"), ("b", "t1"), ("a", "t2"), ("b", "t2")]
    assert pending(all_pairs, lambda c, t: (c, t) == ("b", "t1")) == [("a", "t1"), ("a", "t2"), ("b", "t2")]
