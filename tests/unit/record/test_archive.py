"""Run archives: reserved by one mkdir, filled, swept when a crash left them unfilled."""

from __future__ import annotations

from mp_engine.record.archive import create_run, fill_run, open_runs, reserve_run, sweep_unfilled_runs


def test_reserve_gives_unique_ids_for_the_same_mp_in_the_same_second(ws):
    a, b = reserve_run(ws, "MP-1.0"), reserve_run(ws, "MP-1.0")
    assert a.run_id != b.run_id and a.run_id.endswith("MP-1.0") and b.run_id.endswith("MP-1.0-2")


def test_an_unsafe_mp_id_is_not_a_path(ws):
    run = reserve_run(ws, "../../etc/passwd")
    assert run.dir.parent == ws.runs_dir and "/" not in run.run_id
    assert reserve_run(ws, None).run_id.endswith("UNPARSED")


def test_create_run_holds_the_exact_bytes_and_a_ledger(ws):
    data = b"# MP-1.0\r\n\xff bytes as sent"
    run, ledger = create_run(ws, mp_id="MP-1.0", data=data, mp_sha256="s", executor="shell")
    assert run.mp_copy.read_bytes() == data
    assert run.ledger().model == ledger.model and ledger.model.executor == "shell"
    assert run.steps_dir.is_dir()


def test_a_reserved_run_without_its_ledger_is_swept_and_a_filled_one_is_kept(ws):
    crashed = reserve_run(ws, "MP-1.0")  # the claim died before fill_run
    torn = reserve_run(ws, "MP-1.1")
    fill_run(torn, mp_id="MP-1.1", data=b"x", mp_sha256="s", executor="shell")
    torn.ledger_path.write_text('{"run_id": "cut sho')  # a ledger cut short by the crash
    kept, _ = create_run(ws, mp_id="MP-1.2", data=b"y", mp_sha256="s", executor="shell")
    removed = sweep_unfilled_runs(ws)
    assert sorted(p.name for p in removed) == sorted([crashed.run_id, torn.run_id])
    assert kept.dir.is_dir() and not crashed.dir.exists()


def test_open_runs_lists_only_runs_not_closed(ws):
    open_run, _ = create_run(ws, mp_id="MP-1.0", data=b"x", mp_sha256="s", executor="shell")
    closed_run, ledger = create_run(ws, mp_id="MP-1.1", data=b"x", mp_sha256="s", executor="shell")
    ledger.close()
    assert [r.run_id for r in open_runs(ws)] == [open_run.run_id]
    assert closed_run.ledger().model.status == "closed"


def test_half_built_temp_run_directories_are_swept_and_real_runs_kept(ws):
    from mp_engine.core.atomic import TEMP_MARKER
    from mp_engine.record.archive import sweep_incomplete_runs

    half = ws.runs_dir / f"20260101T000000Z-MP-1.0{TEMP_MARKER}123-abc"
    half.mkdir(parents=True)
    kept, _ = create_run(ws, mp_id="MP-1.1", data=b"x", mp_sha256="s", executor="shell")
    assert sweep_incomplete_runs(ws) == [half] and kept.dir.is_dir()


def test_a_run_with_step_output_is_never_taken_for_unfilled(ws):
    run = reserve_run(ws, "MP-1.3")  # the ledger is gone, but the run did work
    (run.dir / "steps").mkdir()
    (run.dir / "steps" / "step-001.stdout").write_text("output\n")
    assert sweep_unfilled_runs(ws) == [] and run.dir.is_dir()


def test_earlier_runs_of_the_same_bytes_are_found_newest_first(ws):
    from mp_engine.record.archive import runs_of

    first, _ = create_run(ws, mp_id="MP-7.0", data=b"a", mp_sha256="same", executor="shell")
    create_run(ws, mp_id="MP-7.0", data=b"b", mp_sha256="other", executor="shell")
    second, _ = create_run(ws, mp_id="MP-7.0", data=b"a", mp_sha256="same", executor="shell")
    create_run(ws, mp_id="MP-17.0", data=b"a", mp_sha256="same", executor="shell")  # another MP id
    assert runs_of(ws, "MP-7.0", "same") == [second, first]
    assert runs_of(ws, "MP-7.0", "same", newest=1) == [second]
    assert runs_of(ws, "MP-9.9", "same") == []
