"""The reviewer's round (issue #42): a side step the scheduler runs alone, like a drift
check, when every task passed and before the work lands (state/review.py decides on its
record). `[agent.reviewer]` gets the goal, the MP's checks as they last ran on the work
(with the end of their output), and the whole diff since the run started, in the run's
worktree, read-only in the OS sandbox (as `[diagnose]`: no bubblewrap, no review, and the
work does not land). It answers under a nonce of this review's own, which no worker saw.

Ledger step `REVIEW-<n>` (kind `review`), evidence under `agent/REVIEW-<n>/iter-001/`; the
record names, for each item, the task it goes back to: the task it names, or the task whose
commit last changed the file it names (else the plan's last task).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from mp_engine.agent.call.caller import Caller
from mp_engine.agent.call.invoke import Call
from mp_engine.agent.evidence import IterationEvidence
from mp_engine.agent.judge import review as verdicts
from mp_engine.agent.prompt import reviewer as reviewing
from mp_engine.agent.run.attempt import Attempt, call
from mp_engine.agent.run.parts import WorkspaceParts
from mp_engine.agent.state.apply import apply
from mp_engine.agent.state.kinds import Effect, RecordKind
from mp_engine.agent.state.model import RunState
from mp_engine.core.atomic import read_tail
from mp_engine.core.gitcmd import git
from mp_engine.execute import sandbox
from mp_engine.record.ledger import StepStatus

if TYPE_CHECKING:
    from mp_engine.agent.run.sidesteps import Unanswered

NONCE_RE = re.compile(r'^<review nonce="([0-9a-f]+)">', re.M)
MT_SUBJECT_RE = re.compile(r"^\S+ (MT-\d{3}):")  # a task's commit: `MP-4.1 MT-002: title`


class Reviewer:
    def __init__(self, parts: WorkspaceParts):
        """`parts`: in the run's own worktree (where the work that would land is)."""
        self.parts = parts
        self.run = parts.run
        # Read-only, always in the sandbox, the engine's own files hidden (consult.py's way).
        self.caller = Caller(parts.run, parts.place.workdir, read_only=True)

    def step(self, state: RunState, unanswered: Unanswered) -> list[Effect]:
        """The pending review: its record applied (its effects returned), or, when its call
        did not answer, `unanswered` told (sidesteps.Unanswered)."""
        level = self.run.cfg.reviewer
        assert level is not None
        n = len(state.campaign.reviews) + 1
        name = f"REVIEW-{n}"
        ev = IterationEvidence(self.run.run_dir, name, 1)
        text = self.run.steps.prompt_once(ev, name, lambda: self.prompt(state, secrets.token_hex(8)))
        step = self.run.steps.start(name, "review", name, str(n), hashlib.sha256(text.encode()).hexdigest())
        rec: dict[str, Any] = {"round": n, "evidence": ev.rel, "level_name": level.name}
        if (why := sandbox.problem()) is not None:
            rec.update(verdict="none", error=f"it runs only read-only in the OS sandbox, which cannot work here: {why}")
        else:
            self.run.emit("review_started", id="MPE-REVIEW-START", round=n, agent=level.name)
            a = Attempt(name, None, 1, level, state.level, step, ev, [])
            answer = call(replace(self.parts, caller=self.caller), a)
            if answer.pauses or answer.ends_run:
                killed = "a second stop signal killed the reviewer's call; it runs again"
                unanswered(state, self.parts, a, answer, f"the reviewer ({level.name})", "[agent.reviewer]", killed)
                return []
            nonce = NONCE_RE.search(text)
            got = verdicts.parse(self.caller.read_output(ev), nonce.group(1) if nonce else "-")
            rec.update(self.verdict(state, got, answer), usage=answer.usage)
        rec["seq"] = state.applied + 1
        self.parts.recorder.side(step, ev, rec, ok=rec["verdict"] == "approve")
        return apply(state, RecordKind.REVIEW, rec)

    def verdict(self, state: RunState, got: verdicts.Review, answer: Call) -> dict[str, Any]:
        """The record's verdict, each item placed on the task it goes back to."""
        if got.verdict != "changes":
            ended = f" (the call ended `{answer.kind}`: {answer.detail})" if answer.kind != "ok" else ""
            return {"verdict": got.verdict, "items": [], "error": got.error + ended if got.error else ""}
        current = [state.tasks[i].mt_id for i in state.current_tasks()]
        owners = self.owners()
        items = []
        for target, change in got.items:
            if target in current:
                mt = target
            else:
                mt = owners.get(target) or current[-1]
            items.append({"target": target, "mt": mt, "change": change})
        return {"verdict": "changes", "items": items, "error": ""}

    def owners(self) -> dict[str, str]:
        """{file: the task whose commit last changed it}, from the work branch's commits since
        the run started (newest first)."""
        base = self.parts.place.base.head
        if not base:
            return {}
        out = git(self.parts.place.workdir, "log", "--format=%x00%s", "--name-only", f"{base}..HEAD", check=False)
        found: dict[str, str] = {}
        for entry in out.out.split("\0")[1:]:
            subject, *files = entry.strip("\n").split("\n")
            m = MT_SUBJECT_RE.match(subject)
            if m is not None:
                for f in filter(None, (f.strip() for f in files)):
                    found.setdefault(f, m.group(1))
        return found

    def prompt(self, state: RunState, nonce: str) -> str:
        current = state.current_tasks()
        tasks = []
        for i in current:
            t, planned = state.tasks[i], state.plan.tasks[i]
            files = f" (files: {', '.join(planned.files)})" if planned.files else ""
            tasks.append(f"- {t.mt_id}: {t.title}{files}")
        place = self.parts.place
        return reviewing.prompt(
            mp_id=self.run.mp.mp_id,
            goal=state.plan.goal or self.run.mp.title or self.run.mp.mp_id,
            tasks=tasks,
            checks=self.checks_seen(),
            diff=place.worktree.diff(place.base),
            earlier=state.campaign.reviews,
            nonce=nonce,
        )

    def checks_seen(self) -> list[reviewing.CheckSeen]:
        """Each check of the MP as it last ran (the ledger's newest step of it)."""
        steps = self.run.ctx.ledger.model.steps
        cap = self.run.cfg.output_tail_bytes
        out = []
        for block in self.run.mp.checks:
            last = next((s for s in reversed(steps) if s.step_id.endswith(f"_{block.step_id}")), None)
            ran = last is not None and last.status in (StepStatus.COMPLETED, StepStatus.FAILED)
            tail = ""
            if last is not None and ran:
                parts = [
                    read_tail(self.run.ctx.run.steps_dir / f"{last.step_id}.{sfx}", cap) for sfx in ("stdout", "stderr")
                ]
                tail = "\n".join(p for p in parts if p)[-cap:]
            ok = (last.status is StepStatus.COMPLETED) if ran and last is not None else None
            out.append(reviewing.CheckSeen(block, ok, last.step_id if last else "", tail))
        return out
