"""The faults, each with what recovery from it means, measured from the moment the fault
ends (the daemon started again, the remote or the receiver back, the space freed):

  daemon_kill   kill -9 of the daemon, started again after `hold` s: recovered when the
                state file names the new daemon (its start-up recovery is done)
  agent_kill    kill -9 of a working agent CLI: recovered when that run calls an agent
                again, or has a result
  remote_down   `git daemon` stopped for `hold` s: recovered when the remote holds what
                the engine had committed by the end of the outage
  push_refused  a pre-receive hook declines the engine's pushes for `hold` s: the same
  alerts_down   the alert receiver down for `hold` s: recovered when no alert waits
  disk_full     the engine's file system full for `hold` s: recovered when its reserve
                is back (docs/PROTOCOL.md §9)

One fault at a time, in the schedule's order, each `delay` s after the send it follows.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from bench.soak.observe import INDEX, RemoteView, parse_lines, result_key
from bench.soak.workload import FaultPlan

RECOVERY_DEADLINE = 180.0


@dataclass
class Fault:
    kind: str
    after: int
    start: float  # time.time() when it struck
    end: float = 0.0  # when it was lifted
    recovered: float | None = None  # seconds from `end` to recovery; None: never
    applied: bool = True  # false: nothing to strike (no agent was working)
    note: str = ""


def marked(pid: int, prefix: str) -> dict[str, str] | None:
    """The MP_* markers of process `pid` when its MP_RUN_DIR lies under `prefix`."""
    try:
        env = psutil.Process(pid).environ()
    except (psutil.Error, OSError):
        return None
    run_dir = env.get("MP_RUN_DIR", "")
    return {k: v for k, v in env.items() if k.startswith("MP_")} if run_dir.startswith(prefix) else None


def agents(runs_prefix: str) -> list[int]:
    """The soak agent's processes at work now (MP_MT set, soaker.py in their argv)."""
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info.get("cmdline") or [])
        if "soaker.py" in cmd and (m := marked(p.info["pid"], runs_prefix)) and m.get("MP_MT"):
            out.append(p.info["pid"])
    return out


class Faults(threading.Thread):
    """Strikes the scheduled faults one at a time and measures each recovery."""

    def __init__(self, world: Any, seed: int):
        super().__init__(daemon=True, name="soak-faults")
        self.w = world
        self.rng = random.Random(seed * 7919)
        self.pending: list[tuple[float, FaultPlan]] = []
        self.done: list[Fault] = []
        self.problems: list[str] = []
        self.cond = threading.Condition()
        self.quiet_requests = 0
        self.busy = False
        self.stopping = False

    # -- the driver's side -------------------------------------------------------------

    def after_send(self, index: int, plans: list[FaultPlan]) -> None:
        with self.cond:
            now = time.monotonic()
            self.pending += [(now + p.delay, p) for p in plans if p.after == index]
            self.pending.sort(key=lambda x: x[0])
            self.cond.notify_all()

    def hold(self) -> Callable[[], None]:
        """No fault strikes until the returned function is called; waits for the one
        under way (and its recovery) to end first."""
        with self.cond:
            self.quiet_requests += 1
            self.cond.wait_for(lambda: not self.busy)

        def release() -> None:
            with self.cond:
                self.quiet_requests -= 1
                self.cond.notify_all()

        return release

    def drain(self, timeout: float) -> None:
        """Wait until every scheduled fault struck and recovered."""
        with self.cond:
            self.cond.wait_for(lambda: not self.pending and not self.busy, timeout)

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()

    # -- the thread --------------------------------------------------------------------

    def run(self) -> None:
        while True:
            with self.cond:
                self.cond.wait_for(lambda: self.stopping or (self.pending and not self.quiet_requests))
                if self.stopping:
                    return
                fire_at, plan = self.pending[0]
                left = fire_at - time.monotonic()
                if left > 0:
                    self.cond.wait(left)  # the moment itself: a later send or a hold may come first
                    continue
                self.pending.pop(0)
                self.busy = True
            try:
                self.done.append(self.strike(plan))
            except Exception as e:  # noqa: BLE001 - a broken injector is reported, the run goes on
                self.problems.append(f"fault {plan.kind} after job {plan.after} failed to strike: {e!r}")
            finally:
                with self.cond:
                    self.busy = False
                    self.cond.notify_all()

    def strike(self, plan: FaultPlan) -> Fault:
        f = Fault(plan.kind, plan.after, time.time())
        recovered = getattr(self, f"_{plan.kind}")(f, plan.hold)
        f.end = f.end or time.time()
        if f.applied:
            t0 = time.monotonic()
            deadline = t0 + RECOVERY_DEADLINE
            while not recovered():
                if self.stopping:
                    return f
                if time.monotonic() > deadline:
                    self.problems.append(
                        f"no recovery from {plan.kind} (after job {plan.after}) in {RECOVERY_DEADLINE:g} s"
                    )
                    return f
                time.sleep(0.05)
            f.recovered = time.time() - f.end
        return f

    # -- each kind: strike, lift, and return the recovery condition -------------------------

    def _daemon_kill(self, f: Fault, hold: float) -> Callable[[], bool]:
        self.w.engine.kill9()
        time.sleep(hold)  # the service manager's restart delay
        self.w.engine.start()
        f.end = time.time()
        pid = self.w.engine.pid
        return lambda: (self.w.state().get("daemon") or {}).get("pid") == pid or self.w.engine.exited() is not None

    def _agent_kill(self, f: Fault, hold: float) -> Callable[[], bool]:
        deadline = time.monotonic() + 5.0
        found: list[int] = []
        while not found and time.monotonic() < deadline:
            found = agents(self.w.runs_prefix)
            if not found:
                time.sleep(0.1)
        if not found:
            f.applied, f.note = False, "no agent was working"
            return lambda: True
        pid = self.rng.choice(found)
        run = Path(marked(pid, self.w.runs_prefix)["MP_RUN_DIR"]).name if marked(pid, self.w.runs_prefix) else ""
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            f.applied, f.note = False, "the agent ended first"
            return lambda: True
        f.note = run
        f.end = time.time()
        return lambda: self.w.agent_called_since(run, f.end) or self.w.has_result(run, f.end)

    def _remote_down(self, f: Fault, hold: float) -> Callable[[], bool]:
        self.w.server.stop()
        time.sleep(hold)
        self.w.server.start()
        return self._caught_up()

    def _push_refused(self, f: Fault, hold: float) -> Callable[[], bool]:
        self.w.refuse_flag.touch()
        time.sleep(hold)
        self.w.refuse_flag.unlink()
        return self._caught_up()

    def _caught_up(self) -> Callable[[], bool]:
        """Every result the host had when the fault ended is on the remote (the engine's
        commits are replayed over the orchestrator's, so their ids change: results count)."""
        had = set(host_results(self.w.root))
        remote = RemoteView(self.w.bare, self.w.env)  # its own: the driver's is read by the driver

        def caught_up() -> bool:
            remote.refresh()
            return had <= set(remote.results)

        return caught_up

    def _alerts_down(self, f: Fault, hold: float) -> Callable[[], bool]:
        self.w.receiver.stop()
        time.sleep(hold)
        self.w.receiver.start()
        outbox = self.w.root / "SYSTEM/.engine/alerts.jsonl"
        return lambda: not outbox.exists()

    def _disk_full(self, f: Fault, hold: float) -> Callable[[], bool]:
        taken = self.w.disk.fill()
        time.sleep(hold)
        self.w.disk.release()
        f.note = f"{taken // 1024} KiB taken"
        reserve = self.w.root / "SYSTEM/.engine/reserve"

        def back() -> bool:
            try:
                return reserve.stat().st_size >= 1024 * 1024
            except FileNotFoundError:
                return False

        return back


def agent_calls(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def host_results(root: Path) -> list[tuple[str, str, str]]:
    out = []
    for path in INDEX:
        try:
            text = (root / path).read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        out += [result_key(e) for e in parse_lines(text, path, [])]
    return out
