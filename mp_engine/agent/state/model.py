"""An agent run's state as data (issue #40): `RunState`, a dataclass of plain fields that
the reducers (state/apply.py and the modules it names) change one record at a time, and its
views. Every task has its own `Cursor`, also when one task runs at a time.

`isolated` is the run's placement as far as decisions go: tasks in worktrees of their own,
each accepted task integrated onto `mp/<MP-id>` one at a time (checks: the task's own), or
one task at a time in the run's worktree (checks: its own and every earlier task's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mp_engine.agent.call.chain import chain_for
from mp_engine.agent.call.usage import Usage
from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.judge.breakers import Breakers
from mp_engine.agent.plan.decompose import Plan
from mp_engine.agent.state.kinds import DEAD, LIVE, Pending, TaskStatus
from mp_engine.config.agent import AgentConfig, AgentLevel


@dataclass
class Cursor:
    """Where a micro-task stands in its chain: the level, the failures there, the residual
    trend, the breakers, the done signals, and what the last iteration left in its
    workspace (to tell progress)."""

    level: int = 0
    fails_at_level: int = 0
    trend: list[int] = field(default_factory=list)  # residuals at this level
    breakers: Breakers = field(default_factory=Breakers)
    done_streak: int = 0  # iterations in a row the agent claimed the task done
    last_digest: str | None = None  # the workspace fingerprint after the last iteration
    prev_passed: set[str] = field(default_factory=set)

    def restart(self) -> None:
        """A fresh start at a new level or on a new task: counters and trend reset."""
        self.fails_at_level, self.trend, self.done_streak = 0, [], 0
        self.breakers.reset()

    def moved_to(self) -> Cursor:
        """The cursor of the task that works next in the same workspace: what that
        workspace holds (its fingerprint, the checks passing there) and this level; fresh
        counters."""
        return Cursor(level=self.level, last_digest=self.last_digest, prev_passed=set(self.prev_passed))


@dataclass
class TaskState:
    mt_id: str
    title: str
    status: TaskStatus = TaskStatus.PENDING
    iterations: int = 0
    levels: list[int] = field(default_factory=list)
    final_level: int | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    note: str | None = ""  # why it was skipped
    replaced: bool = False  # a re-plan replaced it (it did not pass, or never ran)
    # Tasks in worktrees of their own (docs/AGENT.md): when it ran, its integration failures, alone at last.
    started_at: str | None = None
    ended_at: str | None = None
    overlapped_with: list[str] = field(default_factory=list)
    starts: int = 0  # worktrees it started in (a refresh starts it again)
    base: str | None = None  # the commit of mp/<MP-id> its worktree started from
    refresh_due: bool = False  # its work did not integrate: its worktree starts over from the tip
    integration_failures: int = 0
    solo: bool = False  # integrated only when no other task runs (max_integration_retries spent)
    answers: list[dict[str, str]] = field(default_factory=list)  # what it asked and a person answered
    review: list[dict[str, str]] = field(default_factory=list)  # the reviewer's requested changes on it (issue #42)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mt_id": self.mt_id,
            "title": self.title,
            "status": self.status,
            "iterations": self.iterations,
            "levels": self.levels,
            "final_level": self.final_level,
            "note": self.note,
            "replaced": self.replaced,
            "residuals": [r["residual"] for r in self.records],
            "level_names": [r.get("level_name") for r in self.records],
            "evidence": [r["evidence"] for r in self.records],
            **(
                {"started_at": self.started_at, "ended_at": self.ended_at, "overlapped_with": self.overlapped_with}
                if self.started_at
                else {}
            ),
            **({"workers": self.workers} if self.workers else {}),
            **({"answers": self.answers} if self.answers else {}),
            **({"review": self.review} if self.review else {}),
        }

    @property
    def workers(self) -> list[str]:
        """The fleet's workers its iterations ran on, in order (docs/FLEET.md)."""
        return [r["worker"] for r in self.records if r.get("worker")]


@dataclass
class Campaign:
    """Plans and drift checks (issue #17): the planning round or drift check that comes
    before the next iteration, and what they decided so far."""

    planned: bool
    pending: Pending | None = None
    plan_round: int = 0  # 0: the first plan; N: the Nth re-plan
    plan_attempt: int = 0  # invalid answers in this round
    plan_error: str = ""  # why the last answer was refused (shown to the planner)
    replan_cause: dict[str, Any] | None = None
    replans: list[dict[str, Any]] = field(default_factory=list)
    drift_q: int = 0  # quarter marks (1..3) already checked in this plan
    drift_at: int = 0  # the pending drift check's mark, in percent
    drift_checks: list[dict[str, Any]] = field(default_factory=list)
    final_verified: bool = False
    # Gates (issue #42): a plan waiting for a person's approval (state/approval.py), and the
    # reviewer's verdicts on the verified work (state/review.py).
    awaiting: bool = False  # the newest plan waits for `approve`
    plan_first: int = 0  # the index of the newest plan's first task
    approvals: list[dict[str, Any]] = field(default_factory=list)  # each answer to a plan, and what it did
    reviews: list[dict[str, Any]] = field(default_factory=list)
    review_rounds: int = 0  # times the reviewer's requested changes went back to the tasks
    review_approved: bool = False


@dataclass
class RunState:
    cfg: AgentConfig
    plan: Plan
    isolated: bool  # tasks in worktrees of their own, integrated one at a time
    campaign: Campaign
    chains: list[tuple[AgentLevel, ...]]  # each task's levels (its route, or [agent] levels)
    tasks: list[TaskState]
    cursors: dict[int, Cursor]
    verified: bool  # the MP has checks: EXACT is possible
    focus: int = 0  # the task a record or a decision is about
    applied: int = 0  # records applied so far (each record carries its own as `seq`)
    integrations: int = 0  # INT-<n> steps so far
    total: int = 0  # iterations of every task
    escalations: int = 0
    drop_backs: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    failures: list[cert.Certificate] = field(default_factory=list)  # tasks that did not pass; the first decides
    final: cert.Certificate | None = None
    last_summary: str | None = None  # the agent's last SUMMARY line
    last_trip: dict[str, Any] | None = None  # the last breaker or divergence that fired
    last_record: dict[str, Any] | None = None  # the last iteration's (the result shows its checks)
    fatal_fix: str | None = None  # the fix a call that could not work proposed (its record's)
    usage: Usage = field(default_factory=Usage)  # tokens and dollars, as the CLIs reported them

    @classmethod
    def begin(cls, cfg: AgentConfig, plan: Plan, base_digest: str, *, planned: bool, isolated: bool) -> RunState:
        """The state before any record: a planned run waits for its plan; otherwise, one
        task at a time, the first task is active (tasks at once start when scheduled)."""
        tasks = [TaskState(t.mt_id, t.title) for t in plan.tasks]
        state = cls(
            cfg=cfg,
            plan=plan,
            isolated=isolated,
            campaign=Campaign(planned, Pending.PLAN if planned else None),
            chains=[chain_for(cfg, t.domain) for t in plan.tasks],
            tasks=tasks,
            # One at a time, the tasks work on where the last left the run's worktree; in
            # worktrees of their own, each starts with its worktree (state/tasks.py).
            cursors={} if isolated else {0: Cursor(last_digest=base_digest)},
            verified=bool(plan.check_from),
        )
        if tasks and not isolated:
            tasks[0].status = TaskStatus.ACTIVE
        return state

    # -- the task in focus -------------------------------------------------------------

    @property
    def cur(self) -> Cursor:
        return self.cursors.setdefault(self.focus, Cursor())

    @property
    def level(self) -> int:
        return self.cur.level

    @property
    def levels(self) -> tuple[AgentLevel, ...]:
        """The escalation chain of the task in focus."""
        return self.chains[self.focus] if self.focus < len(self.chains) else self.cfg.levels

    @property
    def task(self) -> TaskState | None:
        return self.tasks[self.focus] if self.focus < len(self.tasks) else None

    @property
    def next_iteration(self) -> int:
        return (self.task.iterations if self.task else 0) + 1

    @property
    def residual(self) -> int | None:
        task = self.task
        return task.records[-1]["residual"] if task and task.records else None

    def best(self) -> dict[str, Any] | None:
        task = self.task
        if not task or not task.records:
            return None
        rec = min(reversed(task.records), key=lambda r: r["residual"])  # lowest, latest on a tie
        keys = ("mt", "iteration", "level", "residual", "failing", "evidence")
        return {k: rec[k] for k in keys}

    # -- the tasks ---------------------------------------------------------------------

    @property
    def dead(self) -> frozenset[int]:
        """The micro-tasks that failed or were skipped: no later task is held to their checks."""
        return frozenset(i for i, t in enumerate(self.tasks) if t.status in DEAD)

    def checks_of(self, mt_index: int) -> list[int]:
        """The checks that accept task `mt_index` now: `Plan.own` when tasks run in worktrees
        of their own, `Plan.accepting` one at a time (each task held to the earlier ones'
        checks too). A task the reviewer sent back: every check of the MP (its change comes
        after all the work)."""
        if self.tasks[mt_index].review:
            return list(range(len(self.plan.check_from)))
        if self.isolated:
            return self.plan.own(mt_index, self.dead)
        return self.plan.accepting(mt_index, self.dead)

    def live(self) -> list[int]:
        """The tasks started and not yet ended (running, or waiting for integration)."""
        return [i for i, t in enumerate(self.tasks) if t.status in LIVE]

    def accepted(self) -> list[int]:
        return [i for i, t in enumerate(self.tasks) if t.status is TaskStatus.ACCEPTED]

    def current_tasks(self) -> list[int]:
        """The tasks of the plan as it stands (not replaced by a re-plan)."""
        return [i for i, t in enumerate(self.tasks) if not t.replaced]

    def completed_ids(self) -> dict[str, int]:
        """The ids a re-plan's tasks may depend on: MT ids and planner ids of done tasks."""
        out: dict[str, int] = {}
        for i, t in enumerate(self.tasks):
            if t.status is TaskStatus.COMPLETED:
                out[t.mt_id] = i
                if self.plan.tasks[i].ref:
                    out[self.plan.tasks[i].ref] = i
        return out

    def can_replan(self) -> bool:
        return self.campaign.planned and len(self.campaign.replans) < self.cfg.max_replans

    def pause_due(self, j: int) -> bool:
        """Task `j` is marked `(pause)` and nobody answered that pause yet (issue #34)."""
        t = self.tasks[j]
        return self.plan.tasks[j].pause and t.iterations == 0 and t.starts == 0 and not t.answers

    def startable(self, busy: set[int]) -> list[int]:
        """The pending tasks that may start now, in plan order: every task each needs has
        passed; its planned files overlap none of `busy` (the live tasks) nor of one
        started before it in this list; a solo task only when nothing else is live, and
        then alone. Nothing starts while a planning round or a drift check is pending, nor
        when the run does not start its tasks itself (one at a time, each follows the last)."""
        if not self.isolated or self.final is not None or self.campaign.pending is not None:
            return []
        if any(self.tasks[i].solo for i in busy):
            return []
        out: list[int] = []
        taken = set(busy)
        for j, t in enumerate(self.tasks):
            if t.status is not TaskStatus.PENDING or self.pause_due(j):  # a pause point starts only once answered
                continue
            if any(self.tasks[n].status is not TaskStatus.COMPLETED for n in self.plan.needs(j)):
                continue
            if t.solo and (taken or out):
                continue
            files = set(self.plan.tasks[j].files)
            if files and any(files & set(self.plan.tasks[k].files) for k in taken):
                continue
            out.append(j)
            taken.add(j)
            if t.solo:
                break
        return out

    def metric_bests(self) -> list[dict[str, Any]]:
        """Per metric check that ran: its metric, target and the value closest to it."""
        best: dict[str, dict[str, Any]] = {}
        for t in self.tasks:
            for r in t.records:
                for m in r.get("metrics", []):
                    if m["id"] not in best or m["distance"] <= best[m["id"]]["distance"]:
                        best[m["id"]] = {**m, "mt": r["mt"], "iteration": r["iteration"]}
        return list(best.values())
