"""Every non-EXACT certificate becomes an ERROR diagnosis with exactly one fix."""

from __future__ import annotations

import pytest

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.judge.certificate import Certificate, diagnosis

BEST = {
    "mt": "MT-002",
    "iteration": 4,
    "level": 1,
    "residual": 1,
    "failing": ["check-2"],
    "evidence": "agent/MT-002/iter-004",
}


@pytest.mark.parametrize(
    ("type_", "reason", "kind", "fix_says"),
    [
        (cert.TIMEOUT, "max_iterations", "agent_timeout", "`[agent] max_iterations`"),
        (cert.TIMEOUT, "wall_budget", "agent_timeout", "`Timeout:`"),
        (cert.DIVERGED, "breaker:no_progress", "agent_breaker", "make its instruction more precise"),
        (cert.DIVERGED, "residual_grew", "agent_diverged", "Split MT-002"),
        (cert.BLOCKED, "hard_gate", "agent_hard_gate", "saying how MT-002 goes on"),
        (cert.BLOCKED, "agent_blocked", "agent_blocked", "mp-engine answer MP-"),
        (cert.BACKPRESSURE, "stop_file", "agent_backpressure", "Delete SYSTEM/STOP"),
        (cert.NEED_INFO, "no_levels", "agent_need_info", "`[agent] levels`"),
        (cert.NEED_INFO, "no_checks", "agent_need_info", "## Validate"),
        (cert.BLOCKED, "ci_failed", "pull_request_ci_failed", "push a fix to its branch mp/MP-6.1"),
        (cert.BLOCKED, "pull_request_git", "pull_request_git", "Fix what git names"),
        (cert.BLOCKED, "pull_request_forge", "pull_request_forge", "Read the forge's answer"),
    ],
)
def test_each_certificate_has_its_class_and_one_fix(type_, reason, kind, fix_says):
    c = Certificate(type_, reason, "What happened.", mt="MT-002", residual=1, best=BEST)
    d = diagnosis(c, "MP-6.1")
    assert d.kind == kind and fix_says in d.fix
    # Exactly one fix: send it again approved, or (a question) answer it and the run goes on.
    assert d.fix.endswith("`Approves: MP-6.1`.") or "Approves: MP-6.1" in d.fix or "mp-engine answer MP-6.1" in d.fix
    if type_ in (cert.TIMEOUT, cert.DIVERGED):
        assert "The best iteration was MT-002 iteration 4 at level 1 with residual 1" in d.diagnosis


def test_a_blocked_diagnosis_says_what_the_agent_asked_for_and_how_to_give_it():
    c = Certificate(
        cert.BLOCKED, "agent_blocked", "The agent reported being blocked on MT-001: the DB password", mt="MT-001"
    )
    d = diagnosis(c, "MP-6.3", fix="a CLI fix that must not be used")
    assert d.kind == "agent_blocked" and "agent CLI failed" not in d.summary
    assert "(the DB password)" in d.fix and "mp-engine answer MP-6.3 'TEXT'" in d.fix
    assert "send --answer MP-6.3" in d.fix and "the same run goes on" in d.fix and "a CLI fix" not in d.fix


def test_a_cli_failure_keeps_the_fix_the_loop_worked_out():
    c = Certificate(cert.BLOCKED, "agent_auth", "claude is not logged in.", mt="MT-001")
    d = diagnosis(c, "MP-6.2", fix="Log `claude` in as the engine's user.")
    assert d.kind == "agent_auth" and d.fix == "Log `claude` in as the engine's user."


def test_a_certificate_round_trips():
    c = Certificate(
        cert.TIMEOUT, "max_iterations", "x", mt="MT-001", residual=2, best=BEST, residual_history=[{"r": 1}]
    )
    assert Certificate.from_dict(c.to_dict()) == c
