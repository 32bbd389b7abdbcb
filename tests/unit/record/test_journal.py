"""The ledger's journal: a step transition is one appended line, not a rewrite of the
whole ledger (issue #20: 5,000 steps at a flat rate)."""

from __future__ import annotations

import json

from mp_engine.record import journal
from mp_engine.record.ledger import JOURNAL_MIN_BYTES, Ledger, StepStatus


def make(tmp_path) -> Ledger:
    return Ledger.create(tmp_path / "ledger.json", run_id="r", mp_id="MP-1.1", mp_sha256="s", executor="shell")


def test_transitions_append_and_leave_ledger_json_alone(tmp_path):
    ledger = make(tmp_path)
    before = (ledger.path.stat().st_ino, ledger.path.read_bytes())
    for n in range(50):
        step = ledger.ensure_step(f"step-{n:03d}", "command", f"k{n}")
        ledger.start(step)
        ledger.finish(step, ok=True, output_ref=None)
    assert (ledger.path.stat().st_ino, ledger.path.read_bytes()) == before  # never rewritten
    assert len(journal.journal_path(ledger.path).read_text().splitlines()) == 100
    loaded = Ledger.load(ledger.path)
    assert [s.status for s in loaded.model.steps] == [StepStatus.COMPLETED] * 50
    assert loaded.step("step-049").attempts == 1


def test_a_rewrite_starts_a_new_generation_and_a_stale_journal_is_ignored(tmp_path):
    ledger = make(tmp_path)
    step = ledger.ensure_step("step-001", "command", "k")
    ledger.start(step)
    stale = journal.journal_path(ledger.path).read_bytes()  # says in_progress, generation 1
    ledger.finish(step, ok=True, output_ref=None)
    ledger.set_outcome({"status": "COMPLETED"})  # a full rewrite: generation 2, journal gone
    assert not journal.journal_path(ledger.path).exists()
    journal.journal_path(ledger.path).write_bytes(stale)  # as a crash before the unlink leaves it
    assert Ledger.load(ledger.path).step("step-001").status is StepStatus.COMPLETED


def test_a_torn_last_line_is_ignored(tmp_path):
    ledger = make(tmp_path)
    a, b = ledger.ensure_step("a", "command", "ka"), ledger.ensure_step("b", "command", "kb")
    ledger.start(a)
    ledger.start(b)
    path = journal.journal_path(ledger.path)
    path.write_bytes(path.read_bytes()[:-7])  # the second line cut by a crash
    loaded = Ledger.load(ledger.path)
    assert [s.step_id for s in loaded.model.steps] == ["a"] and loaded.step("a").status is StepStatus.IN_PROGRESS


def test_the_journal_is_folded_into_the_ledger_once_it_outgrows_it(tmp_path):
    ledger = make(tmp_path)
    ledger.durable = False  # what is measured is how often it is rewritten, not fsync
    rewrites = 0
    inode = ledger.path.stat().st_ino
    for n in range(3000):
        step = ledger.ensure_step(f"step-{n:04d}", "command", f"k{n}")
        ledger.start(step)
        ledger.finish(step, ok=True, output_ref=None)
        if ledger.path.stat().st_ino != inode:
            rewrites, inode = rewrites + 1, ledger.path.stat().st_ino
    # Each fold happens once the journal outgrows the ledger, so they grow apart geometrically.
    assert 1 <= rewrites <= 8, rewrites
    assert journal.journal_path(ledger.path).stat().st_size <= max(JOURNAL_MIN_BYTES, ledger.path.stat().st_size) + 2048
    assert json.loads(ledger.path.read_text())["steps"]  # folded steps live in ledger.json
    assert len(Ledger.load(ledger.path).model.steps) == 3000
