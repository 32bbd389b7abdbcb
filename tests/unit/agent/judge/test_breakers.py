"""Circuit breakers and the rolling-hour call limiter."""

from __future__ import annotations

from mp_engine.agent.judge.breakers import Breakers
from mp_engine.config.agent import AgentConfig

CFG = AgentConfig()


def test_no_progress_opens_after_three_iterations_and_progress_resets_it():
    b = Breakers()
    for _ in range(2):
        b.observe(progress=False, error=None, status_ok=True, work_type="code")
    assert b.tripped(CFG) is None
    b.observe(progress=True, error=None, status_ok=True, work_type="code")
    for _ in range(3):
        b.observe(progress=False, error=None, status_ok=True, work_type="code")
    assert b.tripped(CFG)[0] == "no_progress"


def test_same_error_missing_status_and_test_only():
    b = Breakers()
    for _ in range(5):
        b.observe(progress=True, error="check-001:exit 1", status_ok=True, work_type="code")
    assert b.tripped(CFG) == ("same_error", "the same failure 5 iterations in a row: check-001:exit 1")
    b.reset()
    b.observe(progress=True, error=None, status_ok=False, work_type=None)
    assert b.tripped(CFG) is None
    b.observe(progress=True, error=None, status_ok=False, work_type=None)
    assert b.tripped(CFG)[0] == "missing_status"
    b.reset()
    for _ in range(3):
        b.observe(progress=True, error=None, status_ok=True, work_type="tests")
    assert b.tripped(CFG)[0] == "test_only"


def test_a_breaker_led_to_by_commands_that_could_not_run_names_their_error(engine_for, ws):
    """Issue #34: codex's sandbox helper cannot start, every command fails; the result's
    diagnosis names that error and its fix, not only the breaker."""
    from tests.agentutil import ONE, level
    from tests.conftest import drop, result_field

    engine = engine_for([level("codexish", "sandboxless.py")], max_no_progress=2)
    drop(ws, ONE)
    assert engine.tick().action == "error"
    assert result_field(ws, "Error-Kind") == "agent_environment"
    text = ws.result_file.read_text()
    assert (
        "failed for a reason outside the task: `bwrap: execvp codex-linux-sandbox: No such file or directory`" in text
    )
    assert "breaker no_progress opened" in text and "mp-engine doctor" in text
