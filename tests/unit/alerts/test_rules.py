"""Which events are alerts and what they say (mp_engine/alerts/rules.py): what happened,
for which MP, and the one command that acts on it."""

from mp_engine.alerts.rules import Rules
from mp_engine.config.notify import ALERT_KINDS as ALL


def test_a_failed_mp_that_halts_says_why_and_how_to_lift_the_halt():
    rules = Rules("/srv/ws", ALL)
    failed = {"event": "mp_failed", "mp": "MP-1.4", "kind": "step_failed", "summary": "step 2 exited 1", "fix": "x"}
    error = rules.alert(failed)
    assert error.kind == "error" and "MP-1.4: step 2 exited 1" in error.body and "Approves: MP-1.4" in error.act
    halt = rules.alert({"event": "halted", "mp": "MP-1.4", "approve_with": "Approves: MP-1.4"})
    assert halt.kind == "halt" and halt.mp == "MP-1.4" and "step 2 exited 1" in halt.body and "Fix: x" in halt.body
    assert "`Approves: MP-1.4`" in halt.act and "mp-engine approve --root /srv/ws" in halt.act
    assert "To act:" in halt.text() and "/srv/ws" in halt.text()


def test_an_mp_that_ended_asking_a_person_is_a_blocked_alert_not_a_halt():
    rules = Rules("/ws", ALL)
    rules.alert({"event": "mp_failed", "mp": "MP-2.1", "kind": "agent_blocked", "summary": "MT-002 asks which DB"})
    a = rules.alert({"event": "halted", "mp": "MP-2.1", "approve_with": "Approves: MP-2.1"})
    assert a.kind == "blocked" and "asks a person: MT-002 asks which DB" in a.body
    assert "mp-engine answer MP-2.1 'TEXT' --root /ws" in a.act


def test_a_plan_that_waits_for_approval_is_a_blocked_alert_with_the_plan():
    rules = Rules("/ws", ALL)
    fix = "Read the plan ..., then answer `approve` to start it, `cancel` to end the MP, or what to change"
    waits = {"event": "mp_failed", "mp": "MP-4.1", "kind": "agent_plan_review", "summary": "the plan waits", "fix": fix}
    rules.alert(waits)
    a = rules.alert({"event": "halted", "mp": "MP-4.1", "approve_with": "Approves: MP-4.1"})
    assert a.kind == "blocked" and "the plan waits" in a.body and "`approve`" in a.body
    assert "mp-engine answer MP-4.1 'TEXT' --root /ws" in a.act


def test_only_the_kinds_asked_for_and_no_engine_down_for_once():
    rules = Rules("/ws", ("halt", "engine_down"))
    assert rules.alert({"event": "mp_completed", "mp": "MP-1.0", "duration": 1.2}) is None
    assert rules.alert({"event": "mp_failed", "mp": "MP-1.0", "kind": "k", "summary": "s", "fix": "f"}) is None
    assert rules.alert({"event": "engine_stopped", "pid": 1, "mode": "once"}) is None
    down = rules.alert({"event": "engine_stopped", "pid": 1, "mode": "daemon"})
    assert down.kind == "engine_down" and "systemctl start mp-engine" in down.act
    assert rules.alert({"event": "step_finished"}) is None
    every = Rules("/ws", ALL)
    assert every.alert({"event": "mp_completed", "mp": "MP-1.0", "duration": 1.2}).kind == "completed"
    assert every.alert({"event": "mp_cancelled", "mp": "MP-1.0", "source": "host"}).kind == "cancelled"
    refused = every.alert({"event": "sync_push_refused", "message": "protected branch"})
    assert refused.kind == "push_refused" and "protected branch" in refused.body and "doctor" in refused.act


def test_a_pull_request_that_needs_a_person_is_one_alert_naming_it():
    rules = Rules("/ws", ("halt", "blocked", "pull_request"))
    url = "https://github.com/me/app/pull/7"
    assert rules.alert({"event": "pull_request_opened", "mp": "MP-4.1", "number": 7, "url": url}) is None
    failed = {"event": "mp_failed", "mp": "MP-4.1", "kind": "pull_request_ci_failed", "summary": "CI still failed"}
    assert rules.alert(failed) is None  # "error" is not asked for
    a = rules.alert({"event": "halted", "mp": "MP-4.1", "approve_with": "Approves: MP-4.1"})
    assert a.kind == "pull_request" and url in a.body and "CI still failed" in a.body
    assert url in a.act and "Approves: MP-4.1" in a.act
    used = rules.alert({"event": "pull_request_review_rounds_used", "mp": "MP-4.1", "url": url, "rounds": 3})
    assert used.kind == "pull_request" and "3 review round(s)" in used.body


def test_a_review_round_that_ended_asking_is_a_pull_request_alert_with_the_answer_to_give():
    rules = Rules("/ws", ("blocked", "pull_request"))
    url = "https://github.com/me/app/pull/7"
    rules.alert({"event": "pull_request_review", "mp": "MP-4.1", "url": url, "round": 1})
    rules.alert({"event": "mp_failed", "mp": "MP-4.1", "kind": "agent_blocked", "summary": "MT-002 asks which name"})
    a = rules.alert({"event": "halted", "mp": "MP-4.1", "approve_with": "Approves: MP-4.1"})
    assert a.kind == "pull_request" and "MT-002 asks which name" in a.body and "mp-engine answer MP-4.1" in a.act
    # Outside a review round, the same question is the plain "blocked" alert.
    rules.alert({"event": "mp_completed", "mp": "MP-4.1", "duration": 1})
    rules.alert({"event": "mp_failed", "mp": "MP-4.1", "kind": "agent_blocked", "summary": "asks"})
    assert rules.alert({"event": "halted", "mp": "MP-4.1", "approve_with": "Approves: MP-4.1"}).kind == "blocked"


def test_git_or_the_forge_saying_no_to_a_pull_request_is_a_pull_request_alert_with_its_fix():
    rules = Rules("/ws", ("pull_request",))
    url = "https://github.com/me/app/pull/7"
    rules.alert({"event": "pull_request_opened", "mp": "MP-4.2", "number": 7, "url": url})
    for kind, fix in (("pull_request_forge", "check [repos.app] api_url"), ("pull_request_git", "fix the remote")):
        rules.alert({"event": "mp_failed", "mp": "MP-4.2", "kind": kind, "summary": "said no", "fix": fix})
        a = rules.alert({"event": "halted", "mp": "MP-4.2", "approve_with": "Approves: MP-4.2"})
        assert a.kind == "pull_request" and url in a.body and fix in a.body and "Approves: MP-4.2" in a.act


def test_a_drift_check_that_found_drift_is_a_drift_alert_and_one_that_did_not_is_none():
    # issue #44: the campaign's drift is a notification to a person, not only an event.
    rules = Rules("/ws", ALL)
    regressed = {"event": "campaign_drift_check", "mp": "MP-5.1", "at": 50, "regressed": ["check-001"]}
    a = rules.alert({**regressed, "reflector": "drifted", "why": "it rewrote the API", "drift": True})
    assert a.kind == "drift" and a.mp == "MP-5.1" and a.title == "mp-engine: MP-5.1 drifted from its goal"
    assert "at 50 % of MP-5.1's tasks found drift: check-001 regressed; the reflector says" in a.body
    assert "it rewrote the API" in a.body and "max_replans" in a.body and "mp-engine status --root /ws" in a.act
    assert rules.alert({**regressed, "regressed": [], "reflector": "aligned", "drift": False}) is None
    assert Rules("/ws", ("halt",)).alert({**regressed, "drift": True}) is None  # not asked for


def test_a_spent_budget_is_an_alert_that_says_when_calls_resume():
    """Issue #42: `budget_spent` comes once per day or month (the spend log keeps the mark)."""
    spent = Rules("/ws", ("budget",)).alert(
        {
            "event": "budget_spent",
            "mp": "MP-4.2",
            "period": "day",
            "key": "2026-04-05",
            "spent_usd": 5.1,
            "limit_usd": 5.0,
            "resets_at": "2026-04-06T00:00:00Z",
            "on_budget": "wait",
        }
    )
    assert spent.kind == "budget" and "agent calls wait until 2026-04-06T00:00:00Z" in spent.body
    assert "daily_cost_usd" in spent.act
