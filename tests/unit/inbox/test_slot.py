"""Releasing the inbox slot when a run ends (mp_engine/inbox/slot.py): our MP removed, a
newer one kept, idempotent after a crash in between."""

from __future__ import annotations

import hashlib

from mp_engine.inbox.intake import CLAIMED_PREFIX
from mp_engine.pipeline.finalize import release_slot
from mp_engine.record.archive import create_run
from tests.conftest import events

MP = b"# MP-5.1 Done\n\n```bash\ntrue\n```\n"


def completed_run(ws):
    run, ledger = create_run(ws, mp_id="MP-5.1", data=MP, mp_sha256=hashlib.sha256(MP).hexdigest(), executor="shell")
    return run, ledger


def test_our_mp_is_taken_out_of_the_slot(ws, engine):
    ws.inbox_file.write_bytes(MP)
    run, ledger = completed_run(ws)
    release_slot(engine.ctx, run, ledger)
    assert not ws.inbox_file.exists() and not list(ws.inbox_dir.glob(f"{CLAIMED_PREFIX}*"))


def test_an_untouched_slot_is_left_alone(ws, engine):
    ws.inbox_file.write_bytes(MP)
    run, ledger = completed_run(ws)
    ledger.model.inbox_entry = "untouched"
    release_slot(engine.ctx, run, ledger)
    assert ws.inbox_file.read_bytes() == MP


def test_a_newer_mp_that_replaced_ours_during_the_run_stays_in_the_inbox(ws, engine):
    newer = b"# MP-5.2 Next\n\n```bash\ntrue\n```\n"
    ws.inbox_file.write_bytes(newer)
    run, ledger = completed_run(ws)
    release_slot(engine.ctx, run, ledger)
    assert ws.inbox_file.read_bytes() == newer
    assert not list(ws.inbox_dir.glob(f"{CLAIMED_PREFIX}*"))
    assert events(ws, "inbox_replaced")


def test_a_crash_between_rename_aside_and_delete_is_finished(ws, engine):
    run, ledger = completed_run(ws)
    aside = ws.inbox_dir / f"{CLAIMED_PREFIX}{run.run_id}"
    aside.write_bytes(MP)  # renamed aside, then the engine died
    release_slot(engine.ctx, run, ledger)
    assert not aside.exists() and not ws.inbox_file.exists()


def test_two_newer_mps_during_a_run_keep_the_newest_in_the_inbox_and_the_other_in_the_archive(ws, engine):
    run, ledger = completed_run(ws)
    newer = b"# MP-5.2 Newer\n```bash\ntrue\n```\n"
    newest = b"# MP-5.3 Newest\n```bash\ntrue\n```\n"
    aside = ws.inbox_dir / f"{CLAIMED_PREFIX}{run.run_id}"
    aside.write_bytes(newer)  # renamed aside by this finalize, then the engine died...
    ws.inbox_file.write_bytes(newest)  # ...and the orchestrator wrote another one
    release_slot(engine.ctx, run, ledger)
    assert ws.inbox_file.read_bytes() == newest and run.moved_entry.read_bytes() == newer
    assert events(ws, "inbox_superseded")[-1]["kept"] == ws.rel(run.moved_entry)
