"""Chaos with git on (issue #19): a stream of MPs through the real daemon while it is
SIGKILLed at random moments, inside git commands included, and a reader checks the state
file the whole time.

At the end every MP has exactly one result on the remote, its step ran once, the state
was never missing, torn or going backwards, and no lock file is left. CI runs a small
stream; for a soak, raise the knobs:

    MP_ENGINE_CHAOS_MPS=60 MP_ENGINE_CHAOS_KILLS=5 make test PYTEST_ARGS='-k chaos'
"""

from __future__ import annotations

import json
import os
import random
import threading
import time

import pytest

from tests.conftest import read_state, wait_for
from tests.gitutil import clone, engine_workspace, git, make_remote, push_file, remote_file

pytestmark = pytest.mark.daemon

MPS = int(os.environ.get("MP_ENGINE_CHAOS_MPS", "6"))
KILLS = int(os.environ.get("MP_ENGINE_CHAOS_KILLS", "2"))  # per MP
INBOX = "Claude_Inbox/incoming_microproject.txt"


class StateReader(threading.Thread):
    """Reads SESSION_STATE.json in a loop; records every read that is missing, torn, or
    shows an older `last_completed` than one already seen."""

    def __init__(self, path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.reads = 0
        self.problems: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        last = -1
        while not self.done.is_set():
            try:
                data = json.loads(self.path.read_text())
            except FileNotFoundError:
                self.problems.append("missing")
                continue
            except ValueError as e:
                self.problems.append(f"torn: {e}")
                continue
            self.reads += 1
            done = data.get("last_completed") or ""
            n = int(done.split(".")[1]) if done.startswith("MP-30.") else -1
            if n < last:
                self.problems.append(f"went back from MP-30.{last} to {done}")
            last = max(last, n)


def send(orch, n: int) -> None:
    """The orchestrator's loop: wait until the previous MP left the inbox, then push."""
    wait_for(
        lambda: git(orch, "pull", "-q", "--ff-only", check=False) is not None and not (orch / INBOX).exists(),
        timeout=60,
        what=f"the inbox to be free for MP-30.{n}",
    )
    text = f"# MP-30.{n} Chaos\n\n```bash\nmkdir -p out && echo run >> out/ran-{n}.txt\n```\n"
    push_file(orch, INBOX, text, f"send MP-30.{n}")  # rebased and pushed again if the engine pushed first


def test_random_kills_during_a_stream_of_mps_lose_nothing_and_run_nothing_twice(tmp_path, daemon_factory):
    bare = make_remote(tmp_path)
    ws = engine_workspace(tmp_path, f"file://{bare}", poll_interval=0.3)
    orch = clone(f"file://{bare}", tmp_path / "orch")
    reader = StateReader(ws.root / "SESSION_STATE.json")
    reader.start()
    rng = random.Random(19)
    daemon = daemon_factory(ws.root).start()
    kills = 0
    try:
        for n in range(1, MPS + 1):
            send(orch, n)
            for _ in range(KILLS):
                # Not a wait for a condition: a random moment to kill at, the point of the test.
                time.sleep(rng.uniform(0.05, 1.2))
                daemon.kill9()
                kills += 1
                daemon = daemon_factory(ws.root).start()

        def all_done() -> bool:
            git(orch, "pull", "-q", "--ff-only", check=False)
            return not (orch / INBOX).exists() and all((orch / f"out/ran-{n}.txt").exists() for n in range(1, MPS + 1))

        wait_for(all_done, timeout=120, what=lambda: f"every result on the remote; log:\n{daemon.output()[-3000:]}")
    finally:
        reader.done.set()
        reader.join(timeout=10)
    # The last restart may still be starting: stop it once it runs (its handlers are set).
    wait_for(lambda: (read_state(ws).get("daemon") or {}).get("pid") == daemon.pid, what="the last daemon to start")
    daemon.signal(15)
    assert daemon.wait(30) == 0
    assert kills == MPS * KILLS
    assert reader.problems == [] and reader.reads > 0
    results: dict[str, list[str]] = {}
    retried: dict[str, int] = {}
    for path in (orch / "SYSTEM" / "runs").glob("*/result.json"):
        r = json.loads(path.read_text())
        results.setdefault(r["mp_id"], []).append(r["status"])
        ledger = json.loads((path.parent / "ledger.json").read_text())
        # A kill while the step itself ran makes recovery run it again (the default
        # `interrupted_step = "rerun"`); a step that had finished must never run twice. The
        # interrupted attempt may or may not have written its line before it died (recovery
        # kills what survives of it), so each retry adds at most one line.
        retried[r["mp_id"]] = sum("step-001" in rec["steps_to_retry"] for rec in ledger["recoveries"])
    assert results == {f"MP-30.{n}": ["COMPLETED"] for n in range(1, MPS + 1)}
    for n in range(1, MPS + 1):  # the step appends a line per run of it
        runs = remote_file(bare, f"out/ran-{n}.txt").count("run")
        assert 1 <= runs <= 1 + retried[f"MP-30.{n}"], (n, runs, retried[f"MP-30.{n}"])
    assert list((ws.root / ".git").rglob("*.lock")) == []
