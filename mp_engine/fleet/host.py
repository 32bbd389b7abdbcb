"""The worker's side of an attempt: its own clone of the work repository, a worktree at the
exact commit the attempt names, the agent call with the level of that name from the
worker's own configuration (its credentials never travel), the task's checks, and the
work pushed back to `mp-task/<MP-id>/<MT-id>`. The same parts as on the engine
(agent/run/parts.py): a scratch run archive holds the call's evidence and the checks' steps
while the attempt runs; what goes back is their record and output tails, redacted with
the worker's secrets.
"""

from __future__ import annotations

import re
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mp_engine.agent.api import (
    AgentSteps,
    Attempt,
    Call,
    CallKind,
    CallLimiter,
    IterationEvidence,
    RunScope,
    Snapshot,
    WorkspaceScope,
    call,
    protect,
    workspace_parts,
)
from mp_engine.config.agent import AgentLevel
from mp_engine.config.load import Config
from mp_engine.core.atomic import read_tail
from mp_engine.core.clock import now_iso
from mp_engine.core.events import EventLog
from mp_engine.core.gitcmd import git
from mp_engine.core.workspace import Workspace
from mp_engine.execute.steps import StepContext, TimeBudget
from mp_engine.fleet import snapshot
from mp_engine.fleet.spec import CHECK_CAP, OUTPUT_CAP, AttemptResult, AttemptSpec, CheckOutcome, slug
from mp_engine.inbox.mpfile import parse
from mp_engine.record.archive import RunArchive
from mp_engine.record.ledger import Ledger, read_artifact
from mp_engine.sync.redact import Redactor

REMOTE = "origin"
COMMIT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # SHA-1 or SHA-256
BRANCH = re.compile(r"mp-task/[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


class AttemptRefused(Exception):
    """The attempt names a commit or branch no engine would: never retried (the workflow's
    retry policy names this type)."""


def refusal(spec: AttemptSpec) -> str | None:
    """Why the worker will not run this attempt: its git names must be what an engine
    sends, never an option or a path outside `mp-task/`."""
    if not COMMIT.fullmatch(spec.commit):
        return f"commit {spec.commit[:80]!r} is not a commit id"
    if not BRANCH.fullmatch(spec.branch) or ".." in spec.branch or spec.branch.endswith(".lock"):
        return f"branch {spec.branch[:80]!r} is not an mp-task/<MP-id>/<MT-id> branch"
    return None


class WorkerHost:
    """One worker's clone (`<root>/repo.git`), attempt worktrees (`<root>/work/`) and
    scratch runs (`<root>/runs/`)."""

    def __init__(self, root: Path, config: Config, remote: str, identity: str):
        self.root = root
        self.config = config
        self.remote = remote
        self.identity = identity
        self.repo = root / "repo.git"
        self.redact = Redactor.from_config(config)
        slots = config.agent.max_parallel_checks
        self.check_slots = threading.Semaphore(slots) if slots else None
        self.limiter = CallLimiter(root / "agent_calls.log", config.agent.calls_per_hour)
        # `git worktree add` and fetches into one repository, one at a time (two worktree
        # adds at once fail reading each other's records).
        self.git_lock = threading.Lock()
        # A finished attempt's worktree is removed after its outcome went back.
        self.cleaner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mp-attempt-cleanup")
        self._ready = False

    def prepare(self) -> None:
        """The clone, made once (bare: the attempts' worktrees are its only checkouts); what
        an earlier worker process left of its attempts goes."""
        if self._ready:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        if not (self.repo / "HEAD").exists():
            git(self.root, "clone", "--bare", "--quiet", self.remote, str(self.repo), timeout=600)
        else:
            git(self.repo, "remote", "set-url", REMOTE, self.remote)
        for left in (self.root / "work", self.root / "runs"):
            shutil.rmtree(left, ignore_errors=True)
        git(self.repo, "worktree", "prune")
        self._ready = True

    def settle(self) -> None:
        """Wait until the finished attempts' worktrees are removed."""
        self.cleaner.submit(lambda: None).result()

    def level(self, name: str) -> AgentLevel | None:
        agent = self.config.agent
        chains = [agent.levels, *(r.levels for r in agent.routes), (agent.planner,), (agent.reflector,)]
        return next((lv for chain in chains for lv in chain if lv is not None and lv.name == name), None)

    # -- one attempt -------------------------------------------------------------------

    def run(self, spec: AttemptSpec, cancel: threading.Event, tries: int) -> AttemptResult:
        if (why := refusal(spec)) is not None:
            raise AttemptRefused(f"attempt {spec.attempt_id[:120]!r} refused: {why}")
        started = now_iso()
        name = f"{slug(spec.attempt_id)}-{tries}"
        path, run_dir = self.root / "work" / name, self.root / "runs" / name
        level = self.level(spec.level_name)
        if level is None:
            detail = (
                f"worker {self.identity} has no agent level named {spec.level_name!r}; give its mp-engine.toml that "
                f"level, or route the level to a queue whose workers have it (`[fleet] queues`)"
            )
            return AttemptResult(
                Call(CallKind.NOT_FOUND, detail=detail).to_dict(), self.identity, tries, started_at=started
            )
        self._checkout(spec, name, path)
        try:
            result = self._attempt(spec, level, path, run_dir, cancel, tries)
            if not cancel.is_set():
                result.commit = snapshot.commit_work(
                    path, f"{spec.mp_id} {spec.mt_id} iteration {spec.iteration} on {self.identity}"
                )
                if result.commit != spec.commit:
                    snapshot.push(path, REMOTE, result.commit, spec.branch)
            result.started_at, result.ended_at = started, now_iso()
            return result
        finally:
            self.cleaner.submit(self._remove, name, path, run_dir)

    def _checkout(self, spec: AttemptSpec, name: str, path: Path) -> None:
        with self.git_lock:
            self.prepare()
            snapshot.fetch(self.repo, REMOTE, spec.branch, spec.commit, f"refs/mp-engine/{name}")
            if path.exists():  # an earlier run of this attempt on this host died here
                git(self.repo, "worktree", "remove", "--force", str(path), check=False)
                shutil.rmtree(path, ignore_errors=True)
                git(self.repo, "worktree", "prune")
            git(self.repo, "worktree", "add", "--quiet", "--detach", "--force", str(path), spec.commit)

    def _remove(self, name: str, path: Path, run_dir: Path) -> None:
        with self.git_lock:
            git(self.repo, "worktree", "remove", "--force", str(path), check=False)
            git(self.repo, "update-ref", "-d", f"refs/mp-engine/{name}", check=False)
        shutil.rmtree(path, ignore_errors=True)
        shutil.rmtree(run_dir, ignore_errors=True)

    def _attempt(
        self, spec: AttemptSpec, level: AgentLevel, path: Path, run_dir: Path, cancel: threading.Event, tries: int
    ) -> AttemptResult:
        """The call and the checks in a scratch run of this host. Long because the scratch
        run, the parts and what goes back are one sequence over the same run archive."""
        mp = parse(spec.mp_text.encode("utf-8"), max_bytes=max(len(spec.mp_text.encode("utf-8")), 1))
        run = RunArchive(run_dir)
        run.steps_dir.mkdir(parents=True, exist_ok=True)
        ledger = Ledger.create(
            run.ledger_path, run_id=spec.run_id, mp_id=spec.mp_id, mp_sha256=mp.sha256, executor="agent"
        )
        ledger.durable = False
        ctx = StepContext(
            ws=Workspace(path),
            config=self.config,
            run=run,
            ledger=ledger,
            mp=mp,
            events=EventLog(run_dir / "events.jsonl", redact=self.redact),
            stop=threading.Event(),
            stop_now=cancel,
            budget=TimeBudget(spec.budget, "wall_budget"),
            cancelled=cancel,
        )
        steps = AgentSteps(ledger, run.steps_dir)
        scope = RunScope(ctx, self.config.agent, "", steps, self.limiter, run_dir / "learnings.md")
        place = WorkspaceScope.at(path, run_dir / "repomap.json", Snapshot(spec.commit, {}))
        parts = workspace_parts(scope, place, self.check_slots)
        ev = IterationEvidence(run_dir, spec.mt_id, spec.iteration)
        ev.write("prompt.md", spec.prompt)
        step = steps.start(spec.step_id, "agent", spec.idempotency_key)
        a = Attempt(spec.mt_id, spec.mt_index, spec.iteration, level, spec.level_index, step, ev, spec.accepting)
        answer = call(parts, a)
        out, omitted = self._tail(ev.path("stdout.txt"), OUTPUT_CAP)
        result = AttemptResult(
            answer.to_dict(),
            self.identity,
            tries,
            stdout=out,
            stdout_omitted=omitted,
            stderr=self._tail(ev.path("stderr.txt"), CHECK_CAP)[0],
        )
        if answer.pauses or answer.ends_run:
            return result
        result.protected = protect(parts, a)  # the checks run on the base's copy of what judges the work
        runs = parts.checker.run(spec.accepting, spec.step_id)
        if runs is None:
            result.checks_interrupted = True
            return result
        for k, (chk, ok, code) in zip(spec.accepting, runs, strict=True):
            record = ledger.step(chk.step_id)
            artifact = (read_artifact(run.steps_dir, record) if record else None) or {}
            result.checks.append(
                CheckOutcome(
                    index=k,
                    step_id=chk.step_id,
                    ok=ok,
                    exit_code=code,
                    artifact={**artifact, "worker": self.identity},
                    stdout=self._tail(run.steps_dir / f"{chk.step_id}.stdout", CHECK_CAP)[0],
                    stderr=self._tail(run.steps_dir / f"{chk.step_id}.stderr", CHECK_CAP)[0],
                )
            )
        return result.fit()

    def _tail(self, path: Path, cap: int) -> tuple[str, int]:
        """The last `cap` bytes of a file, redacted; and how many bytes came before them."""
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return "", 0
        return self.redact(read_tail(path, cap)), max(0, size - cap)
