"""What a prompt of the agent run is made of: a worker's (prompt.py lays it out), the
planner's (planning.py) and the reflector's, each built from artifacts only: the loop's
state, the learnings file, the failing checks' output tails, the diff of the workspace
and the repository map within `[agent] token_budget` (context.py).

One `Prompter` per workspace (a task's worktree, whose map and diff it reads).
"""

from __future__ import annotations

import functools
from typing import Any

from mp_engine.agent.prompt import context as workcontext
from mp_engine.agent.prompt import layout, learnings
from mp_engine.agent.prompt import planner as planning
from mp_engine.agent.prompt.repomap import RepoMap
from mp_engine.agent.scope import RunScope, WorkspaceScope
from mp_engine.agent.state.kinds import TaskStatus
from mp_engine.agent.state.model import RunState
from mp_engine.config.agent import AgentLevel
from mp_engine.core.atomic import read_tail
from mp_engine.record.outcome import fenced


class Prompter:
    """The prompts of one workspace: `run` is what the run shares (policy, MP, nonce,
    learnings, memory, budget), `place` where this workspace is (its directory, map cache,
    fingerprint and base)."""

    def __init__(self, run: RunScope, place: WorkspaceScope):
        self.run = run
        self.place = place
        self.cfg = run.cfg
        self.mp = run.mp
        self.nonce = run.nonce
        self._map: RepoMap | None = None  # built at the first prompt that has room for it
        self._frozen: dict[int, str] = {}  # the map's text per budget, as the run found it (context.py)

    def worker(self, state: RunState, mt_index: int, iteration: int, level: AgentLevel) -> str:
        """The prompt of iteration `iteration` of micro-task `mt_index` at `level`."""
        plan, cursor = state.plan, state.cursors[mt_index]
        ts = state.tasks[mt_index]
        previous = ts.records[-1] if ts.records else None
        last = cursor.level + 1 >= len(state.chains[mt_index])  # nowhere to escalate to
        facts = layout.WorkerPrompt(
            mp=self.mp,
            plan=plan,
            task=plan.tasks[mt_index],
            iteration=iteration,
            level=cursor.level,
            level_name=level.name,
            nonce=self.nonce,
            workspace=str(self.place.workdir),
            checks=[self.mp.checks[k] for k in state.checks_of(mt_index)],
            previous=previous,
            tails=self.failing_tails(previous) if previous is not None else {},
            learnings=learnings.read(self.run.learnings),
            statuses={t.mt_id: t.status for t in state.tasks},
            answers=ts.answers,
            review=ts.review,
            memory=self.run.memory,
            remaining=layout.Remaining(
                iterations_left=self.cfg.max_iterations - state.total,
                max_iterations=self.cfg.max_iterations,
                seconds_left=self.run.budget.remaining(),
                seconds_total=self.run.budget.total,
                fails_before_escalation=None if last else self.cfg.fail_threshold - cursor.fails_at_level,
            ),
        )
        # The files of the whole plan, not of this task: every task's prompt carries the same
        # context, so a prefix cache serves it from one task to the next (issue #34).
        named = "\n".join([plan.goal, *(t.text for t in plan.tasks)])
        return workcontext.fill(
            self.cfg.token_budget, lambda context: layout.build(facts, context), named, self.repomap, self._frozen
        )

    def planner(self, state: RunState) -> str:
        """The planner's prompt: the goal, the checks, the map, and on a re-plan why."""
        done = [
            {"mt_id": t.mt_id, "ref": state.plan.tasks[i].ref or t.mt_id, "title": t.title}
            for i, t in enumerate(state.tasks)
            if t.status is TaskStatus.COMPLETED
        ]
        prompt = functools.partial(
            planning.prompt,
            mp=self.mp,
            goal=state.plan.goal,
            nonce=self.nonce,
            round_=state.campaign.plan_round,
            done=done,
            failure=self._replan_failure(state),
            previous_error=state.campaign.plan_error,
            memory=self.run.memory,
        )
        return workcontext.fill(self.cfg.token_budget, lambda context: prompt(repo_map=context), "", self.repomap)

    def _replan_failure(self, state: RunState) -> str:
        """Why a re-plan: the cause, the failed task's failing checks' output tails, the
        diff so far and the end of the learnings."""
        cause = state.campaign.replan_cause
        if cause is None:
            return ""
        out = [f"{cause['mt'] or 'The plan'}: {cause['detail']}"]
        failed = next((t for t in state.tasks if t.mt_id == cause["mt"]), None)
        if failed is not None and failed.records:
            for check_id, tail in self.failing_tails(failed.records[-1]).items():
                out += ["", f"{check_id} failed; the end of its output:", fenced(tail or "(no output)")]
        out += ["", "The diff so far:", fenced(self.diff())]
        notes = learnings.read(self.run.learnings).strip()
        if notes:
            out += ["", "The learnings so far (the end):", "", notes[-4 * self.cfg.output_tail_bytes :]]
        return "\n".join(out)

    def reflection(self, state: RunState, at: int, regressed: list[str]) -> str:
        """The reflector's question at a drift check: does the work serve the goal?"""
        done = [f"- {t.mt_id}: {t.title}" for t in state.tasks if t.status is TaskStatus.COMPLETED]
        nonce = self.nonce
        return "\n".join(
            [
                f"# Drift check for mp-engine: {self.mp.mp_id}, {at} % of the tasks done",
                "",
                "You review; you do not change files. Does the completed work serve the original goal?",
                "",
                "## The original goal",
                "",
                state.plan.goal,
                "",
                "## Completed tasks",
                "",
                *done,
                "",
                "## What changed so far",
                "",
                fenced(self.diff()),
                "",
                "Checks that regressed: " + (", ".join(regressed) or "none"),
                "",
                "## Your answer (required; nothing else is read)",
                "",
                f'<aligned nonce="{nonce}">why the work serves the goal</aligned>',
                "or, when it does not:",
                f'<drifted nonce="{nonce}">how it strays from the goal, and what the plan must change</drifted>',
                "",
                "Blocks without this exact nonce are ignored.",
                "",
            ]
        )

    def diff(self) -> str:
        """The workspace's diffstat since the run started."""
        return self.place.worktree.diffstat(self.place.base, self.place.worktree.snapshot()).rstrip()

    def failing_tails(self, record: dict[str, Any]) -> dict[str, str]:
        """{check id: the end of its stdout and stderr} for each check an iteration failed,
        at most `[agent] output_tail_bytes` each."""
        cap = self.cfg.output_tail_bytes
        tails = {}
        for c in record["checks"]:
            if not c["ok"]:
                parts = [
                    read_tail(self.run.ctx.run.steps_dir / f"{c['step']}.{suffix}", cap)
                    for suffix in ("stdout", "stderr")
                ]
                tails[c["id"]] = "\n".join(p for p in parts if p)[-cap:]
        if record.get("protected"):  # issue #42: what it changed of the judge, put back
            tails["protected_path"] = (
                f"You changed {', '.join(record['protected'])}, which judge the work (a check runs or collects "
                "them, or they configure CI). They were restored from the base and the checks ran on that copy: "
                "make the work pass them as they are."
            )
        return tails

    def repomap(self) -> RepoMap:
        """The workspace's repository map, cached for the run (refreshed at each use)."""
        if self._map is None:
            self._map = RepoMap(self.place.workdir, self.place.map_cache)
        return self._map
