"""The result: RESULT_last.md a person and an orchestrator can read, and result.json."""

from __future__ import annotations

import json
import os

from mp_engine import __version__
from mp_engine.record.archive import create_run
from mp_engine.record.diagnosis import Diagnosis, engine_error
from mp_engine.record.digest import document, read_result, write_digest
from mp_engine.record.outcome import Outcome, StepReport, fenced, read_capped
from mp_engine.record.result import add_note, render_markdown, write_result

NOW = "2026-11-24T10:00:00.000Z"


def outcome(run_id: str, **over) -> Outcome:
    base = dict(
        status="COMPLETED",
        mp_id="MP-8.1",
        title="Greet",
        run_id=run_id,
        mp_sha256="ab" * 32,
        started_at=NOW,
        finished_at=NOW,
    )
    base.update(over)
    return Outcome(**base)


def test_a_completed_result_has_the_fields_an_orchestrator_greps_for(ws):
    run, _ = create_run(ws, mp_id="MP-8.1", data=b"x", mp_sha256="s", executor="shell")
    o = outcome(run.run_id, steps=[StepReport("step-001", "command", "echo hi", 3, "ok", 0, 0.01, "hi\n")])
    text = write_result(ws, run, o)
    for field in ("MP: MP-8.1", "Status: COMPLETED", f"Run: {run.run_id}", f"MP-SHA256: {'ab' * 32}"):
        assert field in text.splitlines()
    head = text.split("\n\n")[1].splitlines()  # the Key: value lines (issue #44: the versions too)
    assert head[-3:] == [f"Engine: mp-engine {__version__}", "Specification: MP-1.3", "Protocol: v1.0"]
    assert "## Steps" in text and "## Error" not in text and "Approve-With" not in text
    assert ws.result_file.read_text() == text == run.result_md.read_text()
    assert json.loads(run.result_json.read_text()) == document(o, ws)


def test_an_error_result_has_the_diagnosis_one_fix_the_output_and_how_to_approve(ws):
    run, _ = create_run(ws, mp_id="MP-8.2", data=b"x", mp_sha256="s", executor="shell")
    d = Diagnosis(
        "command_not_found", "command not found in step 1", "`jq` is missing.", "Install `jq`.", "step-001", 4
    )
    o = outcome(
        run.run_id, status="ERROR", mp_id="MP-8.2", diagnosis=d, halt_token="MP-8.2", error_output="jq: not found"
    )
    text = render_markdown(o, ws)
    assert "Error-Kind: command_not_found" in text and "Failed-At: step-001" in text
    assert "- Proposed fix: Install `jq`." in text and "Approve-With: Approves: MP-8.2" in text
    assert "```text\njq: not found\n```" in text
    assert o.commit_summary == "MP-8.2: ERROR (command not found in step 1)"


def test_secrets_are_masked_in_every_copy(ws):
    run, _ = create_run(ws, mp_id="MP-8.3", data=b"x", mp_sha256="s", executor="shell")
    o = outcome(run.run_id, notes=["token hunter2 printed"])
    write_result(ws, run, o, redact=lambda s: s.replace("hunter2", "***"))
    for path in (ws.result_file, run.result_md, run.result_json):
        assert "hunter2" not in path.read_text() and "***" in path.read_text()


def test_read_capped_keeps_head_and_tail_and_says_what_it_cut(tmp_path):
    f = tmp_path / "out"
    f.write_bytes(b"HEAD" + b"x" * 10_000 + b"TAIL")
    text, omitted = read_capped(f, 100)
    assert text.startswith("HEAD") and text.endswith("TAIL") and omitted == 10_008 - 100
    assert f"[... {omitted} bytes omitted ...]" in text
    assert read_capped(tmp_path / "missing", 100) == ("", 0)


def test_a_fence_is_longer_than_any_backtick_run_inside():
    assert fenced("a ```` b").startswith("`````text\n")
    assert fenced("plain") == "```text\nplain\n```"


def test_an_engine_error_asks_for_a_bug_report():
    d = engine_error(KeyError("x"))
    assert d.kind == "engine_error" and "KeyError" in d.diagnosis and "bug" in d.fix


def test_result_last_stays_under_64_kib_with_head_tail_and_the_archive_path(ws):
    """A 1 MiB error output and 200 steps of 16 KiB each: RESULT_last.md stays within
    64 KiB, keeps its Key: value lines, each output's head and tail and the path of the
    whole file; result.json in the archive keeps everything."""
    from mp_engine.record.result import RESULT_MAX_BYTES

    run, _ = create_run(ws, mp_id="MP-8.3", data=b"x", mp_sha256="s", executor="shell")
    big = "HEAD-MARK\n" + "x" * (1024 * 1024) + "\nTAIL-MARK\n"
    steps = [
        StepReport(f"step-{i:03d}", "command", "cat big", i, "ok", 0, 0.1, "o" * 16000, "", "steps/s.stdout")
        for i in range(200)
    ]
    diag = Diagnosis("nonzero_exit", "exit 1 in step 1", "It failed.", "Fix it.", step_id="step-001")
    o = outcome(run.run_id, status="ERROR", steps=steps, diagnosis=diag, error_output=big, halt_token="MP-8.3")
    text = write_result(ws, run, o)
    assert len(text.encode()) <= RESULT_MAX_BYTES
    assert "Status: ERROR" in text.splitlines() and "Approve-With: Approves: MP-8.3" in text.splitlines()
    assert "HEAD-MARK" in text and "TAIL-MARK" in text and "cut to keep the result under 64 KiB" in text
    archived = json.loads(run.result_json.read_text())  # tails, and the whole outputs' paths
    assert archived["steps"][0]["stdout_path"] == f"SYSTEM/runs/{run.run_id}/steps/s.stdout"
    # A small result is not touched.
    small = outcome(run.run_id, steps=[StepReport("step-001", "command", "echo", 1, "ok", 0, 0.1, "hi\n")])
    assert "characters cut" not in write_result(ws, run, small)


AGENT_EXTRA = {
    "certificate": {"type": "EXACT", "reason": "all_checks_passed"},
    "work": {"branch": "mp/MP-8.5", "landed": True, "how": "fast-forward", "commit": "c0ffee", "note": "landed"},
    "usage": {"input": 10, "output": 2, "cost_usd": 0.01, "calls": 1, "priced": 1},
    "agent": {"micro_tasks": [{"mt_id": "MT-001", "status": "completed"}], "replans": [], "drift_checks": []},
    "answerable": None,
    "sections": [{"title": "Work branch", "body": "landed"}],
}


def test_the_archived_result_json_is_result_last_json_s_document(ws):
    # issue #44: the archive nested certificate, work, usage and agent under an undocumented `extra`.
    run, ledger = create_run(ws, mp_id="MP-8.5", data=b"x", mp_sha256="s", executor="agent")
    o = outcome(run.run_id, mp_id="MP-8.5", executor="agent", extra=AGENT_EXTRA)
    ledger.set_outcome(o.to_dict())
    write_result(ws, run, o, also=write_digest(ws, o))  # as finalize writes them
    archived = json.loads(run.result_json.read_text())
    assert archived == json.loads((ws.system_dir / "RESULT_last.json").read_text()) == document(o, ws)
    assert "extra" not in archived and archived["schema"] == "mp-engine/result/1"
    assert archived["certificate"]["type"] == "EXACT" and archived["work"]["branch"] == "mp/MP-8.5"
    assert archived["usage"]["calls"] == 1 and archived["micro_tasks"][0]["mt_id"] == "MT-001"
    assert add_note(ws, run, "Git: big.bin was not committed.") and add_note(ws, run, "a second note")
    again = json.loads(run.result_json.read_text())
    assert again["notes"] == ["Git: big.bin was not committed.", "a second note"]
    assert "a second note" in run.result_md.read_text() and again["certificate"] == archived["certificate"]
    assert add_note(ws, run, "a second note") and json.loads(run.result_json.read_text()) == again


def test_an_older_archive_s_result_json_reads_in_the_documented_layout(ws):
    """Engines before issue #44 archived the outcome itself; every reader still reads it."""
    run, _ = create_run(ws, mp_id="MP-8.6", data=b"x", mp_sha256="s", executor="agent")
    old = outcome(run.run_id, mp_id="MP-8.6", executor="agent", extra=AGENT_EXTRA, duration=2.5).to_dict()
    run.result_json.write_text(json.dumps(old))
    doc = read_result(run.dir)
    assert doc == {**document(Outcome.from_dict(old), ws), "engine_version": None}  # which engine: not recorded
    assert doc["certificate"]["type"] == "EXACT" and doc["specification"] == "MP-1.3"
    assert doc["micro_tasks"] == AGENT_EXTRA["agent"]["micro_tasks"] and doc["duration"] == 2.5
    run.result_json.write_text(json.dumps({"mp_id": "MP-8.6", "status": "ERROR", "unknown": 1}))
    assert read_result(run.dir)["status"] == "ERROR"
    run.result_json.write_text("[]")
    assert read_result(run.dir) is None and read_result(ws.runs_dir / "missing") is None


def test_the_last_result_files_are_links_to_the_runs_made_durable_in_one_round(ws, monkeypatch):
    """RESULT_last.md and RESULT_last.json are the run's RESULT.md and result.json (hard
    links): each inode's content fsynced once, both directories for the entries."""
    from tests.conftest import fsynced

    run, _ = create_run(ws, mp_id="MP-8.4", data=b"x", mp_sha256="s", executor="shell")
    calls = fsynced(monkeypatch)
    write_result(ws, run, outcome(run.run_id))
    assert calls == [str(run.result_json), str(run.result_md), str(run.dir), str(ws.system_dir)]
    last_json = ws.system_dir / "RESULT_last.json"
    assert os.path.samefile(ws.result_file, run.result_md) and os.path.samefile(last_json, run.result_json)
    assert json.loads(last_json.read_text())["run_id"] == run.run_id
    monkeypatch.setattr(os, "link", lambda *_a: (_ for _ in ()).throw(OSError(1, "no hard links here")))
    calls.clear()
    write_result(ws, run, outcome(run.run_id, notes=["again"]))  # copies, each fsynced
    assert not os.path.samefile(ws.result_file, run.result_md) and "again" in ws.result_file.read_text()
    assert str(ws.result_file) in calls and str(last_json) in calls and str(ws.system_dir) in calls
