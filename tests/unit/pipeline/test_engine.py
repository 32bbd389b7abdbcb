"""One engine pass (`Engine.tick`): every numbered step of MP-1.3 on one machine."""

from __future__ import annotations

import json
import os
import socket

import pytest

from mp_engine.config.load import load_config
from mp_engine.core.workspace import Workspace
from mp_engine.pipeline.engine import Engine
from mp_engine.record.archive import RunArchive
from mp_engine.record.state import Status
from tests.conftest import dead_pid, drop, events, read_state, result_field, wait_for

OK_MP = """# MP-1.4 Greet
Timeout: 60

```file out/greeting.txt
hello
```

```bash
cat out/greeting.txt
echo "id=$MP_ID step=$MP_STEP"
```

## Validate

```bash
grep -q hello out/greeting.txt
```
"""


@pytest.fixture
def engine(ws: Workspace, monkeypatch) -> Engine:
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    eng = Engine(ws, load_config(ws.root))
    eng.start(daemon=False)
    return eng


def only_run(ws: Workspace) -> RunArchive:
    runs = [p for p in ws.runs_dir.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return RunArchive(runs[0])


def test_idle_when_inbox_is_empty(engine, ws):
    assert engine.tick().action == "idle"
    assert read_state(ws)["status"] == "ONLINE"


def test_success_writes_result_archive_state_and_clears_inbox(engine, ws):
    drop(ws, OK_MP)
    res = engine.tick()
    assert (res.action, res.mp_id) == ("completed", "MP-1.4")
    state = read_state(ws)
    assert state["last_completed"] == "MP-1.4" and state["current"] == "IDLE" and state["status"] == "ONLINE"
    assert not ws.inbox_file.exists()
    assert (ws.root / "out/greeting.txt").read_text() == "hello\n"
    # The result: id, title, status, each step with exit code, duration and output, validation.
    text = ws.result_file.read_text()
    assert result_field(ws, "MP") == "MP-1.4" and result_field(ws, "Status") == "COMPLETED"
    assert result_field(ws, "Title") == "Greet"
    assert "id=MP-1.4 step=step-002" in text
    assert "exit code 0" in text or "Exit code: 0" in text or "exit 0" in text
    assert "1 of 1 checks passed" in text
    # The archive: the MP copied first, the ledger closed, the same result.
    run = only_run(ws)
    assert run.mp_copy.read_text() == OK_MP
    assert run.result_md.read_text() == text
    assert run.ledger().model.status == "closed"
    assert json.loads(run.result_json.read_text())["status"] == "COMPLETED"
    names = [e["event"] for e in events(ws)]
    assert names.index("mp_claimed") < names.index("mp_completed")
    transitions = [(e["to_status"], e["to_current"]) for e in events(ws, "state_changed")]
    assert transitions[-2:] == [("RUNNING", "MP-1.4"), ("ONLINE", "IDLE")]


def test_steps_run_in_the_workspace_with_a_scrubbed_environment(engine, ws, monkeypatch):
    monkeypatch.setenv("LEAKY_TOKEN", "s3cr3t-value")
    drop(ws, "# MP-1.5\n\n```bash\npwd > where.txt\nenv > env.txt\n```\n")
    assert engine.tick().action == "completed"
    assert (ws.root / "where.txt").read_text().strip() == str(ws.root)
    env_lines = (ws.root / "env.txt").read_text()
    assert "s3cr3t-value" not in env_lines and "MP_ID=MP-1.5" in env_lines


def test_error_stops_at_first_failure_diagnoses_and_halts(engine, ws):
    drop(
        ws,
        "# MP-2.0 Fails\n\n```bash\necho one > one.txt\n```\n\n```bash\nno-such-tool --x\n```\n\n```bash\necho three > three.txt\n```\n",
    )
    res = engine.tick()
    assert (res.action, res.mp_id) == ("error", "MP-2.0")
    assert (ws.root / "one.txt").exists() and not (ws.root / "three.txt").exists()
    state = read_state(ws)
    assert state["status"] == "ERROR" and state["current"] == "MP-2.0"
    assert state["halt"]["mp_id"] == "MP-2.0"
    assert result_field(ws, "Status") == "ERROR"
    assert result_field(ws, "Error-Kind") == "command_not_found"
    assert result_field(ws, "Failed-At") == "step-002"
    assert result_field(ws, "Approve-With") == "Approves: MP-2.0"
    text = ws.result_file.read_text()
    assert "no-such-tool: command not found" in text  # the full error output
    assert text.count("Proposed fix:") == 1
    assert "not run" in text  # step 3 is reported as not run
    assert not ws.inbox_file.exists()


def test_halt_holds_new_mps_until_one_approves(engine, ws):
    drop(ws, "# MP-2.0\n\n```bash\nexit 4\n```\n")
    assert engine.tick().action == "error"
    drop(ws, "# MP-2.1\n\n```bash\ntouch should-not-run\n```\n")
    res = engine.tick()
    assert res.action == "halted" and "no `Approves:` header" in res.detail
    assert ws.inbox_file.exists() and not (ws.root / "should-not-run").exists()
    drop(ws, "# MP-2.1\nApproves: MP-1.9\n\n```bash\ntouch should-not-run\n```\n")
    # The held version was replaced before it ran: it gets its result, and the halt stays.
    assert engine.tick().action == "superseded"
    assert read_state(ws)["status"] == "ERROR" and read_state(ws)["halt"]["mp_id"] == "MP-2.0"
    assert result_field(ws, "Status") == "SUPERSEDED"
    assert engine.tick().action == "halted"
    drop(ws, "# MP-2.1\nApproves: MP-2.0\n\n```bash\ntouch ran\n```\n")
    assert engine.tick().action == "superseded"
    assert engine.tick().action == "completed"
    assert (ws.root / "ran").exists()
    state = read_state(ws)
    assert state["status"] == "ONLINE" and state.get("halt") is None and state["last_completed"] == "MP-2.1"
    assert events(ws, "approved")[-1]["by"] == "MP-2.1"
    assert len(events(ws, "mp_superseded")) == 2 and not len(engine.inbox.queue)


def test_local_approve_lifts_the_halt(engine, ws):
    drop(ws, "# MP-2.0\n\n```bash\nfalse\n```\n")
    engine.tick()
    assert engine.approve(via="cli") == "MP-2.0"
    assert read_state(ws).get("halt") is None
    assert engine.approve() is None
    drop(ws, "# MP-2.2\n\n```bash\ntrue\n```\n")
    assert engine.tick().action == "completed"


def test_failed_validation_fails_the_mp(engine, ws):
    drop(ws, "# MP-3.0\n\n```bash\necho hi\n```\n\n## Validate\n```bash\ntest -f missing.txt\n```\n")
    assert engine.tick().action == "error"
    assert result_field(ws, "Error-Kind") == "validation_failed"
    assert "0 of 1 checks passed" in ws.result_file.read_text()


def test_step_timeout_kills_and_diagnoses(engine, ws):
    drop(ws, "# MP-3.1\nStep-Timeout: 0.5\n\n```bash\nsleep 300\n```\n")
    assert engine.tick().action == "error"
    assert result_field(ws, "Error-Kind") == "timeout"
    assert "Step-Timeout:" in ws.result_file.read_text()


def test_mp_timeout_spans_steps(engine, ws):
    drop(ws, "# MP-3.2\nTimeout: 0.6\n\n```bash\nsleep 0.4\n```\n\n```bash\nsleep 300\n```\n")
    assert engine.tick().action == "error"
    assert result_field(ws, "Error-Kind") == "timeout"
    assert result_field(ws, "Failed-At") == "step-002"
    assert "`Timeout:" in ws.result_file.read_text()


def test_output_is_capped_in_the_result_and_whole_in_the_archive(engine, ws, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_EXECUTION__OUTPUT_CAP_BYTES", "1000")
    eng = Engine(ws, load_config(ws.root))
    drop(ws, "# MP-3.3\n\n```bash\nseq 1 20000\n```\n")
    assert eng.tick().action == "completed"
    text = ws.result_file.read_text()
    assert "bytes omitted" in text and "\n20000\n" in text and "\n10000\n" not in text  # head and tail kept
    archived = (only_run(ws).steps_dir / "step-001.stdout").read_text()
    assert archived.splitlines()[0] == "1" and archived.splitlines()[-1] == "20000"


@pytest.mark.parametrize(
    "path, why",
    [("../escape.txt", "climbs out"), ("/tmp/abs.txt", "absolute path"), ("SESSION_STATE.json", "owned by mp-engine")],
)
def test_file_blocks_that_escape_are_refused(engine, ws, path, why):
    drop(ws, f"# MP-4.0\n\n```file {path}\npwned\n```\n")
    assert engine.tick().action == "error"
    assert result_field(ws, "Error-Kind") == "file_refused"
    assert why in ws.result_file.read_text()
    assert not (ws.root.parent / "escape.txt").exists()


def test_file_block_through_an_outward_symlink_is_refused(engine, ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws.root / "link").symlink_to(outside)
    drop(ws, "# MP-4.1\n\n```file link/x.txt\npwned\n```\n")
    assert engine.tick().action == "error"
    assert result_field(ws, "Error-Kind") == "file_refused"
    assert not (outside / "x.txt").exists()


# -- bad input: each kind ends in a clear ERROR result with one fix, and nothing runs --

BAD_INPUTS = {
    "no_header": (b"just some text\n```bash\ntouch ran\n```\n", "not an `# MP-<major>.<minor>` header"),
    "wrong_header": (b"# MP-one\n```bash\ntouch ran\n```\n", "not an `# MP-<major>.<minor>` header"),
    "empty": (b"", "empty"),
    "binary": (b"# MP-1.0\n\x00\x01\x02```bash\ntouch ran\n```\n", "binary"),
    "not_utf8": (b"# MP-1.0\n\xc3\x28\n```bash\ntouch ran\n```\n", "not valid UTF-8"),
    "half_written": (b"# MP-1.0\n\n```bash\ntouch ran\n", "never closed"),
    "nothing_executable": (b"# MP-1.0\n\nPlease do things.\n", "nothing to execute"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_is_an_error_result_never_a_crash(engine, ws, name):
    data, reason = BAD_INPUTS[name]
    drop(ws, data)
    res = engine.tick()
    assert res.action == "error"
    assert result_field(ws, "Status") == "ERROR"
    assert result_field(ws, "Error-Kind") == "invalid_mp"
    text = ws.result_file.read_text()
    assert reason in text and text.count("Proposed fix:") == 1
    assert not (ws.root / "ran").exists()
    assert not ws.inbox_file.exists()
    run = only_run(ws)
    if data:
        assert run.mp_copy.read_bytes() == data  # archived as received
    # Nothing ran: no halt (issue #15); the JSON form says REFUSED.
    assert read_state(ws)["status"] == "ONLINE" and read_state(ws).get("halt") is None
    assert json.loads((ws.system_dir / "RESULT_last.json").read_text())["status"] == "REFUSED"


def test_oversize_file_is_refused_and_moved_to_the_archive(engine, ws, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_ENGINE__MAX_MP_BYTES", "1000")
    eng = Engine(ws, load_config(ws.root))
    drop(ws, b"# MP-1.0\n```bash\ntouch ran\n```\n" + b"#" * 5000)
    assert eng.tick().action == "error"
    assert "over the 1000-byte cap" in ws.result_file.read_text()
    assert not ws.inbox_file.exists() and (only_run(ws).moved_entry).stat().st_size > 5000
    assert not (ws.root / "ran").exists()


def test_symlink_in_the_inbox_is_refused_and_not_followed(engine, ws, tmp_path):
    target = tmp_path / "elsewhere.md"
    target.write_text("# MP-1.0\n```bash\ntouch ran\n```\n")
    ws.inbox_file.symlink_to(target)
    assert engine.tick().action == "error"
    assert "is a symlink" in ws.result_file.read_text()
    assert not (ws.root / "ran").exists()
    assert target.exists()  # the link's target is left alone
    assert only_run(ws).moved_entry.is_symlink() and not os.path.lexists(ws.inbox_file)


def test_directory_with_the_inbox_name_is_refused(engine, ws):
    ws.inbox_file.mkdir()
    (ws.inbox_file / "inner.txt").write_text("x")
    assert engine.tick().action == "error"
    assert "is a directory" in ws.result_file.read_text()
    assert not ws.inbox_file.exists() and only_run(ws).moved_entry.is_dir()


def test_a_file_still_being_written_is_not_taken(ws, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "30")
    eng = Engine(ws, load_config(ws.root))
    eng.start(daemon=False)
    drop(ws, "# MP-5.0\n\n```bash\ntouch ran\n", how="write")
    res = eng.tick()
    assert res.action == "waiting" and res.wait_until is not None
    assert not (ws.root / "ran").exists() and not [p for p in ws.runs_dir.iterdir() if p.is_dir()]


def test_a_file_renamed_into_place_is_taken_once_marked_complete(ws, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "30")
    eng = Engine(ws, load_config(ws.root))
    eng.start(daemon=False)
    drop(ws, OK_MP)
    assert eng.tick().action == "waiting"
    eng.inbox.note_complete()  # what the watcher does on close-after-write or rename
    assert eng.tick().action == "completed"


def test_start_sweeps_temp_files_and_marks_online(ws):
    junk = ws.root / f".SESSION_STATE.json.mpe-tmp-{dead_pid()}-abcd"
    junk.write_text("{")
    eng = Engine(ws, load_config(ws.root))
    eng.start(daemon=True)
    assert not junk.exists()
    state = read_state(ws)
    assert state["status"] == "ONLINE" and state["daemon"]["pid"] == os.getpid()
    assert state["daemon"]["host"] == socket.gethostname()
    eng.shutdown()
    state = read_state(ws)
    assert state["status"] == "OFFLINE" and "daemon" not in state or state.get("daemon") is None


def test_state_file_always_has_the_five_fields(engine, ws):
    drop(ws, OK_MP)
    engine.tick()
    for required in ("last_completed", "current", "status", "engine_version", "last_updated"):
        assert required in read_state(ws)


def test_a_newer_mp_that_arrives_during_the_run_is_kept_and_run_next(engine, ws):
    # The first MP's own step plays the orchestrator: it replaces the inbox file mid-run.
    newer = "# MP-1.6 Next\n\n```bash\ntouch second.txt\n```\n"
    step = (
        f"cat > Claude_Inbox/.next <<'EOF'\n{newer}EOF\nmv Claude_Inbox/.next Claude_Inbox/incoming_microproject.txt\n"
    )
    drop(ws, f"# MP-1.5 First\n\n````bash\n{step}````\n")
    assert engine.tick().action == "completed"
    assert ws.inbox_file.read_text() == newer
    assert events(ws, "inbox_replaced")
    assert not list(ws.inbox_dir.glob(".mpe-claimed-*"))  # the aside copy is gone
    engine.inbox.note_complete()
    assert engine.tick().mp_id == "MP-1.6"
    assert (ws.root / "second.txt").exists() and not ws.inbox_file.exists()


def test_clearing_the_inbox_is_finished_after_a_crash_between_rename_and_delete(engine, ws):
    drop(ws, OK_MP)
    engine.tick()
    run_id = read_state(ws)["last_result"]["run_id"]
    run = RunArchive(ws.runs_dir / run_id)
    ledger = run.ledger()
    # Replay the crash: the MP was renamed aside but the ledger not yet closed.
    aside = ws.inbox_dir / f".mpe-claimed-{run_id}"
    aside.write_bytes(run.mp_copy.read_bytes())
    ledger.model.status = "finishing"
    ledger.save()
    restarted = Engine(ws, load_config(ws.root))
    restarted.tick()
    assert not aside.exists() and not ws.inbox_file.exists()
    assert run.ledger().model.status == "closed"


def test_a_directory_put_in_the_inbox_during_a_run_is_left_for_the_next_tick(engine, ws):
    drop(
        ws,
        "# MP-1.7 Swap\n\n```bash\nrm Claude_Inbox/incoming_microproject.txt && mkdir Claude_Inbox/incoming_microproject.txt\n```\n",
    )
    assert engine.tick().action == "completed"
    assert ws.inbox_file.is_dir()  # not deleted, not mistaken for the MP that ran
    assert engine.tick().action == "error"  # then refused as bad input, with a result
    assert "is a directory" in ws.result_file.read_text()


@pytest.mark.parametrize("left", ["nothing", "mp copy", "half a ledger"])
def test_a_claim_that_crashed_before_its_archive_was_written_is_claimed_again(engine, ws, left):
    """The claim reserves the run (one mkdir) and publishes RUNNING before writing the MP
    copy and the ledger. A crash in that window leaves RUNNING naming a run without a
    readable ledger: the restart removes it and runs the MP, still in the inbox, once."""
    from mp_engine.record.archive import reserve_run

    drop(ws, OK_MP)
    run = reserve_run(ws, "MP-1.4")
    (run.dir / "events.jsonl").write_text('{"event": "state_changed"}\n')  # the run's copy starts at once
    if left != "nothing":
        (run.dir / "steps").mkdir()
        run.mp_copy.write_bytes(ws.inbox_file.read_bytes())
    if left == "half a ledger":
        run.ledger_path.write_text('{"run_id": "')
    engine.state.update(current="MP-1.4", status=Status.RUNNING, run_id=run.run_id, reason="MP claimed")
    kept = reserve_run(ws, "MP-0.9")  # an archive without a ledger but with a result: not ours to remove
    (kept.dir / "RESULT.md").write_text("# an old result\n")

    restarted = Engine(ws, load_config(ws.root))
    res = restarted.tick()
    assert res.action == "completed" and res.mp_id == "MP-1.4"
    assert [e["path"] for e in events(ws, "run_unfilled_removed")] == [ws.rel(run.dir)]
    assert (kept.dir / "RESULT.md").exists()
    started = [e["step"] for e in events(ws, "step_started")]
    assert len(events(ws, "mp_claimed")) == 1 and started and len(started) == len(set(started))  # run once
    state = read_state(ws)
    assert state["status"] == "ONLINE" and state["last_completed"] == "MP-1.4"
    new = RunArchive(ws.runs_dir / state["last_result"]["run_id"])  # may reuse the freed name
    assert new.ledger().model.status == "closed" and new.mp_copy.read_text() == OK_MP
    assert not ws.inbox_file.exists()


class _EngineDied(BaseException):
    """Stands for SIGKILL: nothing after it runs (not caught as an Exception)."""


def test_a_step_spawned_but_not_yet_recorded_is_killed_on_restart(engine, ws, monkeypatch):
    """The engine dies right after spawning a step, before `Ledger.spawned` recorded its
    process group: the ledger says in progress with no pgid. The restart finds the group
    by the run and step in its environment and kills it before the step runs again."""
    from mp_engine.core.pids import proc
    from mp_engine.record.ledger import Ledger

    def die(self, step, pgid, proc_start):
        die.pid = pgid
        raise _EngineDied

    monkeypatch.setattr(Ledger, "spawned", die)
    drop(ws, "# MP-3.3 Orphan\nStep-Timeout: 2\n\n```bash\nsleep 300\n```\n")
    with pytest.raises(_EngineDied):
        engine.tick()
    orphan = die.pid
    assert proc(orphan) is not None and not proc(orphan).zombie  # still running, in its own group
    monkeypatch.undo()

    restarted = Engine(ws, load_config(ws.root))
    res = restarted.tick()
    rec = events(ws, "recovery")[-1]
    assert orphan in (rec.get("killed_pids") or []), rec
    assert res.action == "error" and result_field(ws, "Error-Kind") == "timeout"  # re-run, bounded
    # Killed, it is a zombie child of this test process until someone reaps it: gone.
    wait_for(lambda: (p := proc(orphan)) is None or p.zombie or p.pgid != orphan, what="the orphan to be gone")


def test_an_open_run_whose_mp_copy_is_gone_ends_in_one_error_result_in_that_run(engine, ws):
    from mp_engine.record.archive import create_run

    data = b"# MP-9.1\n```bash\ntrue\n```\n"
    run, ledger = create_run(ws, mp_id="MP-9.1", data=data, mp_sha256="s", executor="shell")
    engine.state.update(current="MP-9.1", status=Status.RUNNING, run_id=run.run_id)
    run.mp_copy.unlink()  # the archive was damaged while the engine was down
    restarted = Engine(ws, load_config(ws.root))
    restarted.start(daemon=False)
    result = restarted.tick()
    assert result.action == "error" and result.run_id == run.run_id
    assert result_field(ws, "Error-Kind") == "engine_error" and result_field(ws, "Run") == run.run_id
    assert [p.name for p in ws.runs_dir.iterdir() if p.is_dir()] == [run.run_id]  # no second run for it


def test_build_picks_the_channel_git_asks_for(ws, tmp_path):
    from mp_engine.sync.channel import GitChannel
    from mp_engine.sync.local import LocalChannel
    from tests.gitutil import engine_workspace, make_remote

    assert isinstance(Engine.build(ws, load_config(ws.root)).sync, LocalChannel)
    git_ws = engine_workspace(tmp_path, f"file://{make_remote(tmp_path)}", name="git-ws")
    engine = Engine.build(git_ws, load_config(git_ws.root))
    try:
        assert isinstance(engine.sync, GitChannel) and engine.sync.enabled
        assert engine.sync.sync.events is engine.events  # one event log, one redactor
    finally:
        engine.sync.close()


def test_an_mp_that_never_started_does_not_halt_and_names_the_header_it_meant(engine, ws):
    """A header typo is an ERROR result (REFUSED in RESULT_last.json) with the corrected
    header as the fix; nothing ran, so the engine stays ONLINE and the next MP runs
    without `Approves:` (issue #15)."""
    drop(ws, "# MP 1.6 Typo\n\n```bash\ntouch ran\n```\n")
    assert engine.tick().action == "error"
    text = ws.result_file.read_text()
    assert "Write the first line as `# MP-1.6 Typo`." in text and "## Not halted" in text
    assert "Approve-With" not in text
    state = read_state(ws)
    assert state["status"] == "ONLINE" and state.get("halt") is None
    assert json.loads((ws.system_dir / "RESULT_last.json").read_text())["status"] == "REFUSED"
    drop(ws, "# MP-1.6 Typo\n\n```bash\ntouch ran\n```\n")
    assert engine.tick().action == "completed" and (ws.root / "ran").exists()


def test_a_python_block_runs_like_a_bash_step(engine, ws):
    drop(
        ws,
        "# MP-1.7 Python\n\n```python\nimport sys\nprint('from python', sys.version_info[0])\n```\n\n```text\nnot run\n```\n",
    )
    assert engine.tick().action == "completed"
    text = ws.result_file.read_text()
    assert "from python 3" in text
    # A block that is not executed is said at the top of the result, not at its end.
    assert text.index("## Notes") < text.index("## Steps") and "```text block is not executed" in text


def test_a_failing_python_block_fails_the_mp(engine, ws):
    drop(ws, "# MP-1.8 Python fails\n\n```python\nraise SystemExit(3)\n```\n")
    assert engine.tick().action == "error" and "exit 3" in ws.result_file.read_text()


def test_without_a_fleet_section_nothing_imports_temporal(tmp_path):
    """The fleet is an optional extra (issue #30): the engine, `status` and `doctor` of a
    workspace without `[fleet]` never load temporalio."""
    import subprocess
    import sys

    from mp_engine.commands.init import init

    init(tmp_path / "ws", None, "main", lambda _: None, ())
    code = (
        "import sys; from mp_engine.cli.main import main; from mp_engine.pipeline.engine import Engine;"
        "from mp_engine.config.load import load_config; from mp_engine.core.workspace import Workspace;"
        f"ws = Workspace.at({str(tmp_path / 'ws')!r}); Engine.build(ws, load_config(ws.root));"
        f"main(['status', '--root', {str(tmp_path / 'ws')!r}]); main(['doctor', '--root', {str(tmp_path / 'ws')!r}]);"
        "print('temporalio' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout + out.stderr
