"""The claim: RUNNING first, the archive next; a refused entry; an open run taken back."""

from __future__ import annotations

import json

import pytest

from mp_engine.config.load import load_config
from mp_engine.core.errors import InvalidMPError
from mp_engine.inbox.intake import Entry, EntryKind, Signature
from mp_engine.inbox.mpfile import parse
from mp_engine.pipeline.claim import claim, reject, reopen
from mp_engine.pipeline.engine import Engine
from mp_engine.record.archive import create_run
from mp_engine.sync.pull import SyncOutcome
from tests.conftest import events, read_state

MP = b"# MP-3.1 Claimed\n\n```bash\ntrue\n```\n"


class RecordingChannel:
    """The no-op channel, remembering what the claim told it (a seam: the real channel's
    RUNNING commit is tested in tests/unit/sync/test_channel.py)."""

    enabled = False
    unreachable = None

    def __init__(self) -> None:
        self.running_calls: list[tuple[str, str]] = []

    def bind(self, events, inbox=None) -> None:
        pass

    def running(self, mp_id: str, run_id: str) -> SyncOutcome:
        self.running_calls.append((mp_id, run_id))
        return SyncOutcome()


@pytest.fixture
def engine(ws) -> Engine:
    eng = Engine(ws, load_config(ws.root))
    eng.start(daemon=False)
    return eng


def test_claim_publishes_running_archives_the_bytes_and_tells_the_channel(ws, engine):
    channel = RecordingChannel()
    engine.ctx.channel = channel
    run, ledger = claim(engine.ctx, parse(MP), MP, "shell")
    state = read_state(ws)
    assert (state["status"], state["current"], state["run_id"]) == ("RUNNING", "MP-3.1", run.run_id)
    assert run.mp_copy.read_bytes() == MP
    assert json.loads(run.ledger_path.read_text())["mp_id"] == "MP-3.1"
    assert channel.running_calls == [("MP-3.1", run.run_id)]
    assert events(ws, "mp_claimed")[-1]["run"] == run.run_id
    # The run's own copy of the events starts with its claim.
    assert any(
        json.loads(line)["event"] == "mp_claimed" for line in (run.dir / "events.jsonl").read_text().splitlines()
    )


def _entry(ws, kind: EntryKind) -> Entry:
    return Entry(ws.inbox_file, kind, Signature(1, 2, 3))


def test_reject_records_an_error_run_named_by_the_header_it_could_read(ws, engine):
    data = b"# MP-4.2 Broken\n\n```file ../outside.txt\nx\n```\n"
    err = InvalidMPError("the path leaves the workspace", "Use a relative path.", line=3)
    run, ledger = reject(engine.ctx, _entry(ws, EntryKind.FILE), data, err)
    outcome = ledger.model.outcome
    assert outcome["status"] == "ERROR" and outcome["mp_id"] == "MP-4.2"
    assert outcome["diagnosis"]["kind"] == "invalid_mp" and outcome["diagnosis"]["line"] == 3
    assert outcome["diagnosis"]["fix"] == "Use a relative path."
    assert ledger.model.inbox_entry == "delete" and run.mp_copy.read_bytes() == data
    assert events(ws, "mp_rejected")[-1]["reason"] == "the path leaves the workspace"


def test_reject_of_an_unreadable_entry_archives_it_and_says_where(ws, engine):
    ws.inbox_file.mkdir()
    err = InvalidMPError("it is a directory", "Write a file.")
    run, ledger = reject(engine.ctx, _entry(ws, EntryKind.DIRECTORY), None, err)
    assert ledger.model.inbox_entry == "archive"
    assert ledger.model.outcome["mp_id"] == "UNPARSED"
    assert ledger.model.outcome["notes"] == [f"The inbox entry was moved to {ws.rel(run.moved_entry)}."]


def test_reopen_kills_nothing_live_and_returns_the_mp(ws, engine):
    run, ledger = create_run(ws, mp_id="MP-3.1", data=MP, mp_sha256="s", executor="shell")
    step = ledger.ensure_step("step-001", "command", "k")
    ledger.start(step)
    mp = reopen(engine.ctx, run)
    assert not isinstance(mp, Exception) and mp.mp_id == "MP-3.1"
    rec = events(ws, "recovery")[-1]
    assert rec["steps_to_retry"] == ["step-001"] and "killed_pids" not in rec  # nothing was spawned


def test_reopen_of_a_run_whose_mp_copy_is_gone_returns_why(ws, engine):
    run, _ = create_run(ws, mp_id="MP-3.1", data=MP, mp_sha256="s", executor="shell")
    run.mp_copy.unlink()
    assert isinstance(reopen(engine.ctx, run), OSError)
