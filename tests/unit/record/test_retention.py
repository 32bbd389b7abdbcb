"""Retention of run archives (record/retention.py), and through the engine and the git
channel: pruned on the host and on the remote in one commit, never the halt's run."""

from __future__ import annotations

from mp_engine.record.archive import create_run
from mp_engine.record.retention import prune, runs
from tests.conftest import drop, events, read_state


def closed_runs(ws, n: int, size: int = 0) -> list[str]:
    names = []
    for i in range(n):
        run, ledger = create_run(ws, mp_id=f"MP-1.{i}", data=b"x", mp_sha256="s", executor="shell")
        ledger.close()
        if size:
            (run.dir / "blob").write_bytes(b"x" * size)
        names.append(run.run_id)
    return names


def test_prunes_in_batches_past_keep_runs_and_keeps_the_newest(ws):
    names = closed_runs(ws, 11)
    assert prune(ws, keep_runs=10, max_bytes=0, protect=set()) == []  # within the 10% slack
    names += closed_runs(ws, 1)
    removed = prune(ws, keep_runs=10, max_bytes=0, protect=set())
    assert removed == names[:2] and [r.name for r in runs(ws)] == names[2:]


def test_max_bytes_prunes_the_oldest_and_never_the_protected_or_open_ones(ws):
    names = closed_runs(ws, 6, size=1000)
    open_run, _ = create_run(ws, mp_id="MP-2.0", data=b"x", mp_sha256="s", executor="shell")  # not closed
    removed = prune(ws, keep_runs=0, max_bytes=2500, protect={names[1]})
    assert names[1] not in removed and open_run.run_id in [r.name for r in runs(ws)]
    assert removed == [names[0], *names[2:5]]
    assert prune(ws, keep_runs=0, max_bytes=0, protect=set()) == []  # 0 = no limit


def test_the_engine_prunes_but_keeps_the_run_of_the_halt(ws, monkeypatch):
    """Halted on MP-3.0, the engine records a SUPERSEDED result for each held MP that the
    next one replaces: the runs pile up and are pruned, the halt's run stays."""
    monkeypatch.setenv("MP_ENGINE_ARCHIVE__KEEP_RUNS", "3")
    from mp_engine.config.load import load_config
    from mp_engine.pipeline.engine import Engine

    engine = Engine(ws, load_config(ws.root))
    engine.start(daemon=False)
    engine.inbox.settle = 0
    drop(ws, "# MP-3.0 Fails\n\n```bash\nexit 1\n```\n")
    assert engine.tick().action == "error"
    halt_run = read_state(ws)["halt"]["run_id"]
    for n in range(1, 9):
        drop(ws, f"# MP-3.{n} Held\n\n```bash\ntrue\n```\n")
        while engine.tick().action == "superseded":
            pass
    names = [r.name for r in runs(ws)]
    assert events(ws, "runs_pruned") and len(names) <= 4 and halt_run in names
    assert read_state(ws)["halt"]["run_id"] == halt_run
