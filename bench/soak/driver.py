"""The run: the orchestrator sends the schedule's MPs (a few in flight, the ones that halt
or are cancelled alone), acts on what the remote shows (approves a halt, answers a
question, cancels a working agent), lets the faults strike, and between bursts lets the
engine go idle to measure it and look for what it left behind."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.soak import check
from bench.soak.faults import Faults, agent_calls
from bench.soak.ledger import Sent, next_action
from bench.soak.observe import result_key
from bench.soak.routes import Cli, InProcess, Mcp
from bench.soak.site import Site, wait_idle
from bench.soak.watch import Sampler, StateWatch, cpu_share
from bench.soak.workload import Job, Kind, Schedule, approval

SEND_DEADLINE = 600.0  # an outage or a hold is seconds; a send that fails this long is a finding
STALL = 300.0  # no result for this long while MPs wait: the run stops and says so


class Stalled(Exception):
    """The engine made no progress for STALL seconds."""


@dataclass
class Checkpoint:
    at: int  # results on the remote then
    idle_cpu: float | None
    disk: int
    remote: int
    left: list[str] = field(default_factory=list)  # what the engine left behind (orphans)


class Driver:
    def __init__(self, site: Site, sched: Schedule, *, depth: int, burst: int, idle_window: float):
        self.site, self.sched = site, sched
        self.depth, self.burst, self.idle_window = depth, burst, idle_window
        self.sent: dict[str, Sent] = {}
        self.assigned: set[tuple[str, str, str]] = set()
        self.actions: list[tuple[str, str]] = []
        self.acting = False
        self.problems: list[str] = []
        self.checkpoints: list[Checkpoint] = []
        self.idle_baseline: float | None = None
        self.approvals = 0
        self.last_progress = time.monotonic()
        self._last_look = 0.0
        self._last_harvest = 0.0
        self.faults = Faults(site, sched.seed)
        self.watch = StateWatch(site.root)
        self.sampler = Sampler(site.engine, lambda: len(site.remote.results))
        self.routes: dict[str, Any] = {}

    # -- the run ---------------------------------------------------------------------------

    def run(self) -> None:
        site = self.site
        site.engine.start()
        self.watch.start()
        self.routes = {
            "orch": InProcess(site.url),
            "mcp": Mcp(site.url, site.route_env("mcp"), site.logs / "mcp.log"),
            "cli": Cli(site.url, site.route_env("cli"), site.base / "cli"),
        }
        self.wait_until(lambda: site.state().get("status") == "ONLINE", 120, "the engine ONLINE")
        self.sampler.start()
        self.faults.start()
        self.checkpoint(baseline=True)
        for job in self.sched.jobs:
            self.send_job(job)
            if (job.index + 1) % self.burst == 0 and job.index + 1 < len(self.sched.jobs):
                self.checkpoint()
        self.drain()
        self.faults.drain(timeout=600)
        self.checkpoint()

    def close(self) -> int | None:
        """Stop the daemon as a service manager does; its exit code."""
        self.faults.stop()
        self.faults.join(timeout=300)  # a fault under way (a restart, a server down) ends first
        self.sampler.close()
        for route in self.routes.values():
            try:
                route.close()
            except Exception as e:  # noqa: BLE001 - a route that will not close is reported
                self.problems.append(f"route {route.name} did not close: {e!r}")
        code = self.site.engine.stop()
        self.watch.close()
        return code

    # -- sending ---------------------------------------------------------------------------

    def send_job(self, job: Job) -> None:
        if job.exclusive:
            self.drain()
        else:
            self.wait_until(lambda: len(self.outstanding()) < self.depth, STALL, "room to send")
        route = self.routes[job.route]
        if job.kind == Kind.DUPLICATE:
            got = self.deliver(lambda: route.send(job.text), f"the duplicate of {job.mp_id}")
            if got["sent"]:
                self.problems.append(f"{job.mp_id}'s bytes were sent again by {job.route} (job {job.index})")
            return
        s = Sent(job.mp_id, job.kind, job.expects, job.route)
        got = self.deliver(lambda: route.send(job.text), job.mp_id)
        s.sent_at = time.time()
        self.sent[job.mp_id] = s
        if not got["sent"]:
            self.problems.append(f"{job.mp_id} (a new MP) was not sent: {got['said'][:200]}")
        self.faults.after_send(job.index, self.sched.faults)
        if job.kind == Kind.CANCEL:
            self.wait_until(lambda: self.agent_at_work(job.mp_id), STALL, f"{job.mp_id}'s agent at work")
            self.deliver(lambda: route.cancel(job.mp_id), f"the cancel of {job.mp_id}")
        if job.exclusive:
            self.drain()

    def deliver(self, call: Callable[[], dict[str, Any]], what: str) -> dict[str, Any]:
        """Call a route until it sends (or finds it there already); meanwhile the engine's
        results are read and acted on, so a halt in the way gets lifted."""
        deadline = time.monotonic() + SEND_DEADLINE
        said = ""
        while time.monotonic() < deadline:
            try:
                got = call()
            except Exception as e:  # noqa: BLE001 - a transport error is retried like an outage
                got = {"sent": False, "already": None, "retry": True, "said": repr(e)}
            if got["sent"] or got["already"] or not got["retry"]:
                return got
            said = got["said"]
            self.tend()
            time.sleep(0.3)
        raise Stalled(f"{what} could not be sent for {SEND_DEADLINE:g} s: {said[:300]}")

    def agent_at_work(self, mp_id: str) -> bool:
        return any(str(c.get("run", "")).endswith(f"-{mp_id}") for c in agent_calls(self.site.calls_log))

    # -- watching and acting -----------------------------------------------------------------

    def outstanding(self) -> list[Sent]:
        return [s for s in self.sent.values() if not s.done]

    def drain(self) -> None:
        self.wait_until(lambda: not self.outstanding() and not self.actions, STALL, "every result")

    def wait_until(self, predicate: Callable[[], Any], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.tend()
            if predicate():
                return
            if time.monotonic() > deadline:
                raise Stalled(f"timed out after {timeout:g} s waiting for {what}")
            if self.outstanding() and time.monotonic() - self.last_progress > STALL:
                waiting = ", ".join(s.mp_id for s in self.outstanding()[:5])
                raise Stalled(f"no result for {STALL:g} s; waiting for {waiting}; state {self.site.state()}")
            time.sleep(0.1)

    def tend(self) -> None:
        """Look at the remote (at most every 0.2 s), act on what it shows, keep the daemon
        up if it ended by itself."""
        if time.monotonic() - self._last_look >= 0.2:
            self._last_look = time.monotonic()
            self.observe()
        if time.monotonic() - self._last_harvest >= 2.0:  # before retention prunes a run, or rotation a line
            self._last_harvest = time.monotonic()
            self.site.host.refresh()
        self.act()
        code = self.site.engine.died()
        if code is not None:
            self.problems.append(f"the daemon exited by itself with code {code} (life {self.site.engine.lives})")
            self.site.engine.start()

    def observe(self) -> None:
        if not self.site.remote.refresh():
            return
        for key, line in list(self.site.remote.results.items()):
            if key in self.assigned:
                continue
            self.assigned.add(key)
            self.last_progress = time.monotonic()
            s = self.sent.get(str(line.get("mp_id")))
            if s is None:
                self.problems.append(f"a result for an MP nobody sent: {line}")
                continue
            s.lines.append(line)
            s.seen_at.append(time.time())
            doc = self.site.remote.result_doc(str(line.get("run_id"))) if line.get("status") == "ERROR" else None
            action = next_action(s, line, doc)
            if action:
                self.actions.append((action, s.mp_id))

    def act(self) -> None:
        if self.acting:
            return
        self.acting = True
        try:
            while self.actions:
                action, mp_id = self.actions[0]
                s = self.sent[mp_id]
                route = self.routes[s.route if s.route in self.routes else "orch"]
                if action == "answer":
                    self.deliver(lambda r=route, m=mp_id: r.answer(m, "Blue, please."), f"the answer to {mp_id}")
                else:
                    self.approve(route, mp_id)
                self.actions.pop(0)
        finally:
            self.acting = False

    def approve(self, route: Any, mp_id: str) -> None:
        self.approvals += 1
        new = f"MP-46.{self.approvals}"
        s = Sent(new, Kind.APPROVAL, ("COMPLETED",), route.name)
        got = self.deliver(lambda: route.approve(mp_id, approval(new, mp_id)), f"the approval of {mp_id}")
        s.sent_at = time.time()
        self.sent[new] = s
        if not got["sent"]:
            self.problems.append(f"the approval {new} of {mp_id} was not sent: {got['said'][:200]}")

    # -- between bursts ------------------------------------------------------------------------

    def checkpoint(self, baseline: bool = False) -> None:
        """Drain, hold the faults, let the engine go idle; measure its idle CPU, the disk, and
        what it left behind."""
        self.drain()
        release = self.faults.hold()
        try:
            wait_idle(self.site, 120)
            self.site.host.refresh()
            pid = self.site.engine.pid
            cpu = cpu_share(pid, self.idle_window) if pid else None
            if baseline:
                self.idle_baseline = cpu
            left = check.leftovers(self.site, self.agent_mp_ids())
            cp = Checkpoint(len(self.site.remote.results), cpu, self.site.disk_used(), self.site.remote_bytes(), left)
            self.checkpoints.append(cp)
        finally:
            release()

    def agent_mp_ids(self) -> set[str]:
        return {s.mp_id for s in self.sent.values() if s.kind in check.AGENT_KINDS}

    def result_keys(self) -> set[tuple[str, str, str]]:
        return {result_key(e) for e in self.site.remote.results.values()}
