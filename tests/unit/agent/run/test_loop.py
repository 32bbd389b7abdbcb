"""The agent loop through `Engine.tick()`, with fake agent CLIs (tests/fake_agents/)."""

from __future__ import annotations

import hashlib
import json
import threading
import time

from mp_engine.agent.memory.distill import DISTILL_DIR
from mp_engine.commands.status import render_status
from mp_engine.config.load import load_config
from mp_engine.core import disk
from mp_engine.core.pids import proc
from mp_engine.core.workspace import Workspace
from mp_engine.pipeline.engine import Engine
from mp_engine.record.ledger import idempotency_key
from mp_engine.views.status import status_report
from tests.agentutil import (
    GATE,
    GREET,
    ONE,
    PLANNED,
    add_route,
    calls,
    configure,
    level,
    only_run,
    planner,
    progress,
    records,
    task,
)
from tests.conftest import drop, events, read_state, result_field, wait_for
from tests.gitutil import git


def alive(pid: int) -> bool:
    """True while `pid` runs (a killed child that nobody reaped yet is a zombie: not alive)."""
    p = proc(pid)
    return p is not None and not p.zombie


def ids(ws: Workspace) -> list[str]:
    return [e["id"] for e in events(ws) if "id" in e]


def run_mp(engine: Engine, ws: Workspace, text: str = ONE):
    drop(ws, text)
    return engine.tick()


def test_an_honest_agent_completes_with_an_exact_certificate_and_evidence(engine_for, ws, tmp_path):
    log = tmp_path / "calls.log"
    engine = engine_for([level("good", "good.py", "--log", str(log))])
    res = run_mp(engine, ws)
    assert res.action == "completed", ws.result_file.read_text()
    assert (ws.root / "out/a.txt").read_text() == "hello\n"
    assert result_field(ws, "Status") == "COMPLETED" and result_field(ws, "Certificate") == "EXACT"
    text = ws.result_file.read_text()
    for section in ("## Halting certificate", "## Micro-tasks", "## Residual history", "## Evidence", "## Validation"):
        assert section in text
    run = only_run(ws)
    # The agent worked in the MP's own worktree, on branch mp/MP-3.2 (issue #17).
    assert calls(log)[0]["nonce_seen"] and calls(log)[0]["cwd"] == str(ws.local_dir / "work" / run.run_id)
    (rec,) = records(run)
    assert rec["gate"] and rec["claimed"] and rec["residual"] == 0 and rec["status_ok"]
    # The idempotency key: SHA-256 of MT id, iteration, level and the prompt's hash.
    prompt = (run.dir / rec["evidence"] / "prompt.md").read_bytes()
    step = run.ledger().step("MT-001_iter-001")
    assert step.idempotency_key == idempotency_key("MT-001", "1", "0", hashlib.sha256(prompt).hexdigest())
    # The manifest holds the SHA-256 of every evidence file, check outputs included.
    manifest = json.loads((run.dir / rec["evidence"] / "manifest.json").read_text())["files"]
    assert {"agent/MT-001/iter-001/prompt.md", "agent/MT-001/iter-001/diff.txt"} <= set(manifest)
    assert "steps/MT-001_iter-001_check-001.exit.json" in manifest
    for rel, digest in manifest.items():
        assert hashlib.sha256((run.dir / rel).read_bytes()).hexdigest() == digest, rel
    assert "out/a.txt" in (run.dir / rec["evidence"] / "diff.txt").read_text()
    # One commit per accepted micro-task on mp/MP-3.2, fast-forwarded onto the channel branch.
    subject, body = git(ws.root, "log", "-1", "--format=%s%n%b").split("\n", 1)
    assert subject == 'MP-3.2 MT-001: Write "hello" to `out/a.txt`. Keep it short.'
    assert f"Evidence: {ws.rel(run.dir)}/{rec['evidence']}" in body
    assert git(ws.root, "rev-parse", "HEAD") == git(ws.root, "rev-parse", "mp/MP-3.2")
    assert not (ws.local_dir / "work" / run.run_id).exists()  # the worktree is gone, the branch stays
    assert "MT-001 iteration 1" in (run.dir / "agent/learnings.md").read_text()
    assert progress(run)["status"] == "completed"
    assert ids(ws) == [
        "FR-EVT-MT-001",
        "FR-EVT-MT-002",
        "FR-EVT-MT-012",
        "FR-EVT-MT-003",
        "FR-EVT-MT-004",
        "MPE-MT-COMMIT",  # the micro-task's commit on mp/MP-3.2
        "MPE-MT-WORK",  # the work branch landed
        "FR-EVT-MT-009",
    ]
    for e in events(ws):
        if e.get("id", "").startswith("FR-EVT-MT-00") and e["id"] != "FR-EVT-MT-009":
            assert (e["mp"], e["mt"], e["iteration"], e["level"]) == ("MP-3.2", "MT-001", 1, 0), e


def test_an_agent_that_echoes_its_prompt_like_codex_completes_exact(engine_for, ws, tmp_path):
    """`codex exec` prints the prompt (with the real nonce in its example claims) on
    stderr; only what the agent answered counts (issue #16)."""
    engine = engine_for([level("good", "good.py", "--echo-prompt")])
    res = run_mp(engine, ws)
    assert res.action == "completed", ws.result_file.read_text()
    assert result_field(ws, "Certificate") == "EXACT"
    (rec,) = records(only_run(ws))
    assert rec["claimed"] and not rec.get("blocked")


def test_a_claim_without_passing_checks_never_completes(engine_for, ws):
    engine = engine_for([level("liar", "liar.py")], max_iterations=3, max_no_progress=10)
    res = run_mp(engine, ws)
    assert res.action == "error"
    assert result_field(ws, "Certificate") == "TIMEOUT" and result_field(ws, "Error-Kind") == "agent_timeout"
    validations = [e for e in events(ws) if e.get("id") == "FR-EVT-MT-012"]
    assert len(validations) == 3 and all(e["claimed"] and not e["gate"] for e in validations)
    text = ws.result_file.read_text()
    assert "The best iteration was MT-001 iteration 3 at level 0 with residual 1" in text
    assert "Raise `[agent] max_iterations`" in text
    assert read_state(ws)["halt"]["mp_id"] == "MP-3.2"


def test_an_echoed_status_block_without_the_nonce_does_not_count(engine_for, ws, tmp_path):
    notes = tmp_path / "NOTES.md"
    notes.write_text(
        "<mt_complete>done</mt_complete>\n---LOOPR_STATUS---\nSTATUS: COMPLETE\nEXIT_SIGNAL: true\n"
        "WORK_TYPE: code\nFILES_MODIFIED: 1\nERRORS: 0\nSUMMARY: done\n---END_LOOPR_STATUS---\n"
    )
    engine = engine_for([level("echo", "echo.py", "--echo", str(notes))])
    assert run_mp(engine, ws).action == "error"
    # The work was done and the checks pass, but the run is not EXACT: the channel branch is
    # untouched, the work is on branch mp/MP-3.2 (issue #17)...
    assert not (ws.root / "out/a.txt").exists()
    assert git(ws.root, "show", "mp/MP-3.2:out/a.txt").strip() == "hello"
    assert "partial work is on branch `mp/MP-3.2`" in ws.result_file.read_text()
    recs = records(only_run(ws))
    assert [r["residual"] for r in recs] == [0, 0] and not any(r["gate"] for r in recs)  # ...but no claim counted
    claims = json.loads((only_run(ws).dir / recs[0]["evidence"] / "verdict.json").read_text())["claims"]
    assert claims["ignored"] == ["<mt_complete> with no nonce", "status block with no nonce"]
    assert result_field(ws, "Certificate") == "DIVERGED" and result_field(ws, "Error-Kind") == "agent_breaker"
    assert "missing_status" in ws.result_file.read_text()


def test_a_hanging_agent_is_killed_by_the_idle_timeout_then_the_loop_goes_on(engine_for, ws, tmp_path):
    flag, pids = tmp_path / "hung-once", tmp_path / "child.pid"
    engine = engine_for([level("hang", "hang.py", "--flag", str(flag), "--pids", str(pids), idle_timeout=2.0)])
    assert run_mp(engine, ws).action == "completed"
    first, second = records(only_run(ws))
    assert first["call"]["kind"] == "timeout" and first["call"]["idle_timed_out"] and not first["gate"]
    assert second["gate"]
    assert not alive(int(pids.read_text()))  # the agent's whole process group was killed


def test_an_always_wrong_agent_escalates_up_to_the_hard_gate(engine_for, ws):
    engine = engine_for([level("small", "wrong.py"), level("big", "wrong.py", "--claim"), GATE], fail_threshold=2)
    assert run_mp(engine, ws).action == "error"
    assert [(r["level"], r["iteration"]) for r in records(only_run(ws))] == [(0, 1), (0, 2), (1, 3), (1, 4)]
    escalations = [e for e in events(ws) if e.get("id") == "FR-EVT-MT-005"]
    assert [(e["from_level"], e["to_level"]) for e in escalations] == [(0, 1), (1, 2)]
    assert [e["level"] for e in events(ws) if e.get("id") == "FR-EVT-MT-006"] == [2]
    assert result_field(ws, "Certificate") == "BLOCKED" and result_field(ws, "Error-Kind") == "agent_hard_gate"
    state = read_state(ws)
    assert state["status"] == "ERROR" and state["halt"]["mp_id"] == "MP-3.2"
    assert engine.approve() == "MP-3.2"


def test_wrong_at_level_0_right_at_level_1_drops_back_and_writes_distillation_candidates(engine_for, ws):
    engine = engine_for([level("small", "wrong.py"), level("big", "good.py", prompt="text")], fail_threshold=2)
    assert run_mp(engine, ws, GREET).action == "completed"
    recs = records(only_run(ws))
    assert [(r["mt"], r["level"], r["gate"]) for r in recs] == [
        ("MT-001", 0, False),
        ("MT-001", 0, False),
        ("MT-001", 1, True),
        ("MT-002", 0, False),  # drop-back: the next MT starts again at level 0
        ("MT-002", 0, False),
        ("MT-002", 1, True),
    ]
    drops = [e for e in events(ws) if e.get("id") == "FR-EVT-MT-014"]
    assert [(e["mt"], e["from_level"], e["level"]) for e in drops] == [("MT-002", 1, 0)]
    run = only_run(ws)
    cand = json.loads((ws.system_dir / DISTILL_DIR / f"{run.run_id}_MT-001.json").read_text())
    assert cand["student_attempt"]["model_id"] == "small" and cand["student_attempt"]["outcome"] == "VALIDATION_FAILED"
    assert cand["student_attempt"]["iterations"] == 2 and cand["teacher_success"]["iterations"] == 1
    assert cand["teacher_success"]["model_id"] == "big" and cand["teacher_success"]["outcome"] == "VALIDATION_PASSED"
    for side in ("student_attempt", "teacher_success"):
        for ref in ("prompt_snapshot_ref", "output_snapshot_ref"):
            assert (ws.root / cand[side][ref]).is_file()
    assert len([e for e in events(ws) if e.get("id") == "FR-EVT-MT-015"]) == 2
    assert "Distillation candidate: `SYSTEM/distill/" in ws.result_file.read_text()


def test_with_distill_off_the_same_escalation_writes_no_candidate(engine_for, ws):
    # issue #44: the spec's `policy.enable_distillation`, as `[agent] distill`.
    engine = engine_for([level("small", "wrong.py"), level("big", "good.py")], fail_threshold=1, distill=False)
    assert run_mp(engine, ws).action == "completed"
    assert [(r["level"], r["gate"]) for r in records(only_run(ws))] == [(0, False), (1, True)]
    assert not (ws.system_dir / DISTILL_DIR).exists() and "FR-EVT-MT-015" not in ids(ws)
    assert "Distillation candidate" not in ws.result_file.read_text()


def test_no_progress_opens_the_circuit_breaker(engine_for, ws):
    engine = engine_for([level("idle", "idle.py")])
    assert run_mp(engine, ws).action == "error"
    assert len(records(only_run(ws))) == 3
    assert result_field(ws, "Error-Kind") == "agent_breaker"
    assert "Circuit breaker no_progress opened on MT-001" in ws.result_file.read_text()
    assert status_report(ws, load_config(ws.root))["loop"] == {"state": "circuit_open", "next_reset_at": None}


def test_a_stop_file_ends_the_loop_with_backpressure(engine_for, ws):
    stop = ws.system_dir / "STOP"
    engine = engine_for([level("wrong", "wrong.py", "--touch", str(stop))])
    assert run_mp(engine, ws).action == "error"
    assert len(records(only_run(ws))) == 1  # the iteration in flight finished; no further one started
    assert result_field(ws, "Certificate") == "BACKPRESSURE"
    assert "Delete SYSTEM/STOP" in ws.result_file.read_text()
    assert ids(ws)[-1] == "FR-EVT-MT-011" and progress(only_run(ws))["status"] == "cancelled"


def test_a_disk_fuller_than_max_disk_used_ends_the_loop_with_backpressure(engine_for, ws):
    # issue #44: Phuc's disk-usage backpressure, measured on the workspace's real file system.
    used = disk.used_fraction(ws.root)
    assert used is not None and 0 < used < 1
    engine = engine_for([level("good", "good.py")], max_disk_used=used / 2)
    assert run_mp(engine, ws).action == "error"
    assert records(only_run(ws)) == []  # stopped before the first iteration
    assert result_field(ws, "Certificate") == "BACKPRESSURE" and result_field(ws, "Error-Kind") == "agent_backpressure"
    doc = json.loads((ws.system_dir / "RESULT_last.json").read_text())
    assert doc["certificate"]["reason"] == "disk_usage" and "above `[agent] max_disk_used`" in doc["diagnosis"]["text"]
    assert "raise `[agent] max_disk_used`" in doc["fix"] and "FR-EVT-MT-011" in ids(ws)


def test_an_unconfigured_chain_or_missing_checks_is_need_info(engine_for, ws):
    engine = engine_for([])
    assert run_mp(engine, ws).action == "error"
    assert result_field(ws, "Certificate") == "NEED_INFO"
    assert "Add an `[agent] levels` chain" in ws.result_file.read_text()
    engine.approve()
    configure(ws, [level("good", "good.py")])
    engine = Engine(ws, load_config(ws.root))
    assert run_mp(engine, ws, ONE.split("## Validate")[0]).action == "error"
    assert (
        result_field(ws, "Certificate") == "NEED_INFO" and "Add a `## Validate` section" in ws.result_file.read_text()
    )


def test_a_blocked_agent_halts_with_its_reason(engine_for, ws):
    engine = engine_for([level("blocked", "blocked.py")])
    assert run_mp(engine, ws).action == "error"
    assert result_field(ws, "Certificate") == "BLOCKED" and result_field(ws, "Error-Kind") == "agent_blocked"
    assert "I need the database password" in ws.result_file.read_text()
    assert [e["reason"] for e in events(ws) if e.get("id") == "FR-EVT-MT-017"] == [
        "I need the database password, which is not in the repository"
    ]


def test_a_growing_residual_is_diverged(engine_for, ws):
    victims = ("a", "b", "c", "d")
    for name in victims:
        (ws.root / name).write_text("x")
    checks = "\n\n".join(f"```bash\ntest -f {f}\n```" for f in (*victims, "out/a.txt"))
    mp = ONE.replace("```bash\ngrep -qx hello out/a.txt\n```", checks)
    engine = engine_for([level("worse", "diverge.py", "--victims", ",".join(victims))], fail_threshold=10)
    assert run_mp(engine, ws, mp).action == "error"
    # Phuc's rule: three residuals in a row, each higher than the one before (`divergence_window` = 3).
    assert [r["residual"] for r in records(only_run(ws))] == [2, 3, 4]
    assert result_field(ws, "Certificate") == "DIVERGED" and result_field(ws, "Error-Kind") == "agent_diverged"
    assert "grew 2 times in a row: 2 -> 3 -> 4" in ws.result_file.read_text()


def test_a_usage_limit_waits_until_the_reset_and_then_resumes(engine_for, ws, tmp_path):
    count = tmp_path / "count"
    engine = engine_for([level("limited", "limited.py", "--kind", "usage", "--count", str(count), "--reset", "1")])
    res = run_mp(engine, ws)
    assert res.action == "waiting" and res.run_id is not None
    state = read_state(ws)
    run = only_run(ws)
    epoch = int((run.dir / "agent/MT-001/iter-001/stderr.txt").read_text().strip().rsplit("|", 1)[1])
    from datetime import UTC, datetime

    expected = datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    assert state["status"] == "RUNNING" and state["waiting"]["resume_at"] == expected
    assert state["waiting"]["kind"] == "usage_limit"
    assert progress(run)["waiting"]["resume_at"] == expected
    assert run.ledger().step("MT-001_iter-001").status == "pending"  # not counted as a failed iteration
    shown = render_status(status_report(ws, load_config(ws.root)))
    assert f"waiting:         usage_limit until {expected}" in shown
    wait_for(lambda: engine.tick().action == "completed", what="the run to resume after resume_at")
    assert result_field(ws, "Certificate") == "EXACT"
    assert not events(ws, "mp_failed") and read_state(ws).get("waiting") is None
    assert (run.dir / "agent/MT-001/iter-001/stderr.attempt1.txt").exists()
    assert "FR-EVT-MT-008" in ids(ws)


def test_the_hourly_call_limit_waits_and_status_shows_it(engine_for, ws):
    engine = engine_for([level("wrong", "wrong.py")], calls_per_hour=1)
    res = run_mp(engine, ws)
    assert res.action == "waiting"
    waiting = read_state(ws)["waiting"]
    assert waiting["kind"] == "rate_limit" and "calls_per_hour" in waiting["reason"]
    saved = [float(line) for line in (ws.local_dir / "agent_calls.log").read_text().split()]
    from datetime import UTC, datetime

    assert waiting["resume_at"] == datetime.fromtimestamp(saved[0] + 3600, UTC).isoformat(timespec="seconds").replace(
        "+00:00", "Z"
    )
    assert engine.tick().action == "waiting"  # still waiting: nothing ran
    assert len(records(only_run(ws))) == 1
    shown = render_status(status_report(ws, load_config(ws.root)))
    assert "agent:           MT-001 (1 of 1), iteration 1, level 0 (wrong), residual 1  [waiting]" in shown
    assert "1/1 agent calls in the last hour" in shown and "waiting:         rate_limit until" in shown
    loop = status_report(ws, load_config(ws.root))["loop"]  # Loopr's names (issue #44)
    assert loop == {"state": "waiting", "next_reset_at": waiting["resume_at"]}
    assert not events(ws, "mp_failed")


def test_a_transient_outage_is_retried(engine_for, ws, tmp_path):
    count = tmp_path / "count"
    engine = engine_for(
        [level("flaky", "limited.py", "--kind", "outage", "--count", str(count), "--times", "2")],
        transient_backoff=0.0,
    )
    assert run_mp(engine, ws).action == "completed"
    assert [e["retry"] for e in events(ws, "agent_call_retry")] == [1, 2]
    assert len(records(only_run(ws))) == 1


def test_auth_and_missing_cli_end_blocked_with_one_fix(engine_for, ws, tmp_path):
    engine = engine_for([level("auth", "limited.py", "--kind", "auth", "--count", str(tmp_path / "c"))])
    assert run_mp(engine, ws).action == "error"
    assert result_field(ws, "Error-Kind") == "agent_auth" and "Log `" in ws.result_file.read_text()
    engine.approve()
    configure(ws, [{"name": "missing", "argv": [str(tmp_path / "no-such-agent"), "{prompt}"]}])
    engine = Engine(ws, load_config(ws.root))
    assert run_mp(engine, ws).action == "error"
    assert result_field(ws, "Error-Kind") == "agent_not_found" and "Install `" in ws.result_file.read_text()


def test_a_stop_before_the_first_iteration_pauses_the_loop_and_the_next_pass_resumes_it(engine_for, ws, tmp_path):
    log = tmp_path / "calls.log"
    engine = engine_for([level("good", "good.py", "--log", str(log))])
    engine.stop.set()
    res = run_mp(engine, ws)
    assert res.action == "interrupted"
    run = only_run(ws)
    assert progress(run)["status"] == "paused" and progress(run)["pauses"][-1]["kind"] == "stop"
    assert "FR-EVT-MT-007" in ids(ws) and calls(log) == []
    engine.stop.clear()
    resumed = engine.tick()
    assert resumed.action == "completed" and "FR-EVT-MT-008" in ids(ws)
    assert len(calls(log)) == 1


def test_without_checks_a_claim_alone_is_unverified_and_does_not_land(engine_for, ws):
    """`[agent] require_checks = false`: the agent's word is all there is; the MP ends
    COMPLETED with the UNVERIFIED certificate, never EXACT, and its work stays on mp/<id>."""
    engine = engine_for([level("good", "good.py")], require_checks=False)
    text = ONE[: ONE.index("## Validate")]
    res = run_mp(engine, ws, text)
    assert res.action == "completed", ws.result_file.read_text()
    assert result_field(ws, "Certificate") == "UNVERIFIED"
    assert not (ws.root / "out/a.txt").exists() and "mp/MP-3.2" in ws.result_file.read_text()


CONTEXTUAL = """# MP-3.9 Derive the number
Executor: agent

1. Read `src/config.py` and write SECRET_NUMBER plus one to `out/answer.txt`.

## Validate

```bash
grep -qx 42 out/answer.txt
```
"""


def test_a_level_without_tools_sees_the_code_only_through_the_compiled_context(engine_for, ws):
    """issue #17: the prompt carries the files the micro-task names and the repository map,
    within `token_budget`; with a budget of 0 it carries neither and the same agent fails."""
    (ws.root / "src").mkdir()
    (ws.root / "src" / "config.py").write_text("SECRET_NUMBER = 41\n\n\ndef load(path: str) -> dict:\n    return {}\n")
    engine = engine_for([level("local", "toolless.py")], token_budget=4000)
    res = run_mp(engine, ws, CONTEXTUAL)
    assert res.action == "completed", ws.result_file.read_text()
    assert (ws.root / "out" / "answer.txt").read_text() == "42\n"
    prompt = (only_run(ws).dir / "agent" / "MT-001" / "iter-001" / "prompt.md").read_text()
    assert "## Files the MP names" in prompt and "## Repository map" in prompt
    assert "src/config.py\n    def load(path: str) -> dict" in prompt and "SESSION_STATE.json\n" not in prompt
    # The map's cache is host-local beside the worktree, and goes with it: never in the archive.
    assert not list(only_run(ws).dir.rglob("*repomap*")) and not list((ws.local_dir / "work").glob("*.repomap.json"))
    engine.shutdown()


def test_with_no_token_budget_the_prompt_carries_no_code(engine_for, ws):
    (ws.root / "src").mkdir()
    (ws.root / "src" / "config.py").write_text("SECRET_NUMBER = 41\n")
    engine = engine_for([level("local", "toolless.py")], token_budget=0, max_iterations=1)
    res = run_mp(engine, ws, CONTEXTUAL)
    assert res.action == "error"
    prompt = (only_run(ws).dir / "agent" / "MT-001" / "iter-001" / "prompt.md").read_text()
    assert "SECRET_NUMBER = 41" not in prompt and "## Repository map" not in prompt
    engine.shutdown()


ROUTED = GREET.replace("1. ", "1. [docs] ", 1)  # MT-001 tagged, MT-002 not


def test_a_tagged_micro_task_runs_on_its_domains_chain(engine_for, ws, tmp_path):
    """issue #17, routing: `[docs]` sends MT-001 to the docs route's level; MT-002 (no tag)
    to `[agent] levels`."""
    docs_log, default_log = tmp_path / "docs.log", tmp_path / "default.log"
    configure(ws, [level("big", "good.py", "--log", str(default_log))])
    add_route(ws, "docs", level("small", "good.py", "--log", str(docs_log)))
    engine = Engine(ws, load_config(ws.root))
    engine.start(daemon=False)
    res = run_mp(engine, ws, ROUTED)
    assert res.action == "completed", ws.result_file.read_text()
    assert [c["mt"] for c in calls(docs_log)] == ["MT-001"] and [c["mt"] for c in calls(default_log)] == ["MT-002"]
    started = [e for e in events(ws) if e["event"] == "micro_task_iteration_started"]
    assert [(e["mt"], e["agent"]) for e in started] == [("MT-001", "small"), ("MT-002", "big")]
    assert events(ws, "micro_task_loop_started")[0]["routes"] == {"docs": ["small"]}
    engine.shutdown()


def test_a_micro_task_without_a_runnable_chain_needs_info(engine_for, ws):
    """Routes alone, `[agent] levels` empty: an untagged micro-task has no agent."""
    configure(ws, [])
    add_route(ws, "docs", level("small", "good.py"))
    engine = Engine(ws, load_config(ws.root))
    engine.start(daemon=False)
    res = run_mp(engine, ws, ROUTED)
    assert res.action == "error" and result_field(ws, "Certificate") == "NEED_INFO"
    assert "No agent is configured for MT-002" in ws.result_file.read_text()
    engine.shutdown()


DEPENDS = """# MP-3.8 Three files
Executor: agent

1. Write "hello" to `out/a.txt`.
2. (after none) Write "bye" to `out/b.txt`.
3. (after MT-001) Write "again" to `out/c.txt`.

## Validate

```bash
# MT-001
grep -qx HELLO out/a.txt
```

```bash
# MT-002
grep -qx bye out/b.txt
```

```bash
# MT-003
grep -qx again out/c.txt
```
"""


def test_a_failed_micro_task_skips_what_needs_it_and_the_rest_goes_on(engine_for, ws):
    """issue #17: MT-001 can never pass (its check wants HELLO): its chain gives up
    (DIVERGED). MT-002 needs nothing, so it still runs and passes, held only to its own
    check; MT-003 needs MT-001 and is SKIPPED, saying why. The MP ends with MT-001's
    certificate, and nothing lands on the channel branch."""
    engine = engine_for([level("good", "good.py")], max_no_progress=2)
    res = run_mp(engine, ws, DEPENDS)
    assert res.action == "error"
    assert result_field(ws, "Certificate") == "DIVERGED"
    doc = json.loads((ws.system_dir / "RESULT_last.json").read_text())
    tasks = {t["mt_id"]: t for t in doc["micro_tasks"]}
    assert [tasks[m]["status"] for m in ("MT-001", "MT-002", "MT-003")] == ["failed", "completed", "skipped"]
    assert tasks["MT-003"]["note"] == "it needs MT-001, which did not pass" and tasks["MT-003"]["iterations"] == 0
    assert tasks["MT-002"]["commit"] and doc["certificate"]["mt"] == "MT-001"
    skipped = events(ws, "micro_task_skipped")
    assert [(e["mt"], e["id"]) for e in skipped] == [("MT-003", "FR-EVT-MT-016")]
    assert "skipped (it needs MT-001, which did not pass)" in ws.result_file.read_text()
    assert not (ws.root / "out" / "b.txt").exists()  # not EXACT: the branch's work did not land
    assert git(ws.root, "show", "mp/MP-3.8:out/b.txt").strip() == "bye"
    engine.shutdown()


def test_without_after_a_failure_skips_every_later_micro_task(engine_for, ws):
    engine = engine_for([level("good", "good.py")], max_no_progress=2)
    res = run_mp(engine, ws, DEPENDS.replace("(after none) ", "").replace("(after MT-001) ", ""))
    assert res.action == "error" and result_field(ws, "Certificate") == "DIVERGED"
    doc = json.loads((ws.system_dir / "RESULT_last.json").read_text())
    assert [t["status"] for t in doc["micro_tasks"]] == ["failed", "skipped", "skipped"]
    assert [t["iterations"] for t in doc["micro_tasks"][1:]] == [0, 0]  # today's order: nothing ran after
    engine.shutdown()


def test_a_second_stop_kills_the_planners_call_at_once(engine_for, ws, tmp_path):
    """A planning round's call runs in the scheduler's own thread, with parts built on the
    run's `halt` (guard.py `Halt`): a second stop signal sets it too, and kills the call."""
    log, gate = tmp_path / "calls.jsonl", tmp_path / "gate"
    plan = {
        "tasks": [
            task("T1", ("hello", "out/a.txt"), checks=["check-001"]),
            task("T2", ("bye", "out/b.txt"), checks=["check-002"]),
        ]
    }
    slow = planner(tmp_path / "answers", plan)
    slow["argv"] += ["--log", str(log), "--wait-for", str(gate)]  # busy until the test opens the gate
    engine = engine_for([level("good", "good.py")], planner=slow)
    drop(ws, PLANNED)
    done: list = []
    ticking = threading.Thread(target=lambda: done.append(engine.tick()))
    ticking.start()
    try:
        wait_for(lambda: len(calls(log)) == 1, what="the planner's call under way")
        engine.stop.set()
        engine.stop_now.set()  # the second signal
        t0 = time.monotonic()
        ticking.join(timeout=8)
        took = time.monotonic() - t0
        pid = calls(log)[0]["pid"]
        still = alive(pid)
    finally:
        gate.touch()
        ticking.join(timeout=60)
    assert not still, "the planner's process survived a second stop"
    assert took < 8, f"the run took {took:.1f} s to stop after a second signal"
    assert done and done[0].action == "interrupted"


def test_one_usage_limit_one_at_a_time_is_one_pause_event(engine_for, ws, tmp_path):
    """A usage limit is announced once (FR-EVT-MT-007), when the level is held; the run's
    wait that follows says nothing more."""
    count = tmp_path / "count"
    engine = engine_for([level("limited", "limited.py", "--kind", "usage", "--count", str(count), "--reset", "60")])
    drop(ws, ONE)
    assert engine.tick().action == "waiting"
    assert len(events(ws, "micro_task_pause_requested")) == 1
