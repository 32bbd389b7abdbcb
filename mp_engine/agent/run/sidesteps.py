"""The steps between iterations (issue #17), run alone by the scheduler: a planning round
(the planner plans, or re-plans, the tasks), a drift check (the checks of the work done
so far run again; the reflector, when there is one, says whether the work still serves the
goal) and the reviewer's review of the verified work (issue #42, review.py). Each works in
the run's own worktree; rounds.py makes the records of the first two.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from mp_engine.agent.call.invoke import Call
from mp_engine.agent.evidence import IterationEvidence
from mp_engine.agent.run import rounds
from mp_engine.agent.run.attempt import Attempt, call
from mp_engine.agent.run.parts import WorkspaceParts
from mp_engine.agent.run.publisher import Publisher
from mp_engine.agent.run.review import Reviewer
from mp_engine.agent.run.steps import iteration_step
from mp_engine.agent.state.apply import apply
from mp_engine.agent.state.kinds import Effect, Pending, RecordKind
from mp_engine.agent.state.model import RunState

# What the scheduler does with a side step's call that did not answer (scheduler._unanswered).
Unanswered = Callable[[RunState, WorkspaceParts, Attempt, Call, str, str, str], None]


class SideSteps:
    def __init__(self, parts: WorkspaceParts, publisher: Publisher):
        """`parts`: in the run's own worktree."""
        self.parts = parts
        self.run = parts.run
        self.cfg = parts.run.cfg
        self.publisher = publisher
        self.reviewer = Reviewer(parts)

    def level(self, state: RunState) -> str | None:
        """The level the pending step calls (the planner, the reviewer, or the reflector of a
        drift check before the end), or None when it calls none."""
        if state.campaign.pending is Pending.PLAN:
            return self.cfg.planner.name if self.cfg.planner else None
        if state.campaign.pending is Pending.REVIEW:
            return self.cfg.reviewer.name if self.cfg.reviewer else None
        reflector = self.cfg.reflector
        return reflector.name if reflector is not None and state.campaign.drift_at < 100 else None

    def step(self, state: RunState, unanswered: Unanswered) -> tuple[list[Effect], str | None]:
        """The pending planning round or drift check: its record applied (its effects
        returned), or, when its call did not answer, `unanswered` told; the second item
        says why a stop cut the drift check's checks short (it runs again)."""
        if state.campaign.pending is Pending.PLAN:
            return self._plan(state, unanswered), None
        if state.campaign.pending is Pending.REVIEW:
            self.publisher.publish(state, live=True)
            return self.reviewer.step(state, unanswered), None
        return self._drift(state, unanswered)

    def _plan(self, state: RunState, unanswered: Unanswered) -> list[Effect]:
        level = self.cfg.planner
        assert level is not None
        name, attempt_no = rounds.plan_round(state)
        ev = IterationEvidence(self.run.run_dir, name, attempt_no)
        step_id = iteration_step(name, attempt_no)
        text = self.run.steps.prompt_once(ev, step_id, lambda: self.parts.prompter.planner(state))
        step = self.run.steps.start(step_id, "plan", name, str(attempt_no), hashlib.sha256(text.encode()).hexdigest())
        self.publisher.publish(state, live=True)
        self.run.emit(
            "campaign_planning",
            id="MPE-PLAN-START",
            round=state.campaign.plan_round,
            attempt=attempt_no,
            agent=level.name,
        )
        a = Attempt(name, None, attempt_no, level, state.level, step, ev, [])
        answer = call(self.parts, a)
        if answer.pauses or answer.ends_run:
            killed = "a second stop signal killed the planner's call; it runs again"
            unanswered(state, self.parts, a, answer, f"the planner ({level.name})", "[agent.planner]", killed)
            return []
        said = self.parts.caller.read_output(ev)
        rec = rounds.plan_record(state, said, self.run.nonce, self.run.mp, answer, attempt_no, ev.rel)
        rec.update(seq=state.applied + 1, usage=answer.usage, level_name=level.name)
        self.parts.recorder.side(step, ev, rec, ok="invalid" not in rec)
        return apply(state, RecordKind.PLAN, rec)

    def _drift(self, state: RunState, unanswered: Unanswered) -> tuple[list[Effect], str | None]:
        name, at = rounds.drift_check(state)
        step = self.run.steps.start(name, "drift", name, str(at))
        self.run.emit("campaign_drift_check_started", id="MPE-DRIFT-START", at=at)
        ran = self.parts.checker.run(rounds.drift_checks(state, self.run.mp, at), name)
        if ran is None:
            self.run.steps.release(step)
            return [], "a stop signal interrupted the drift check; it runs again"
        rec = rounds.drift_record(at, [c.check_id for c, _, _ in ran], [c.check_id for c, ok, _ in ran if not ok])
        ev = IterationEvidence(self.run.run_dir, name, 1)
        level = self.cfg.reflector
        if level is not None and at < 100:
            ev.write("prompt.md", self.parts.prompter.reflection(state, at, rec["regressed"]))
            a = Attempt(name, None, 1, level, state.level, step, ev, [])
            answer = call(self.parts, a)
            if answer.pauses or answer.ends_run:
                killed = "a second stop signal killed the reflector's call; it runs again"
                unanswered(state, self.parts, a, answer, f"the reflector ({level.name})", "[agent.reflector]", killed)
                return [], None
            rec = rounds.reflected(rec, self.parts.caller.read_output(ev), self.run.nonce, ev.rel)
            rec.update(usage=answer.usage, level_name=level.name)
        rec["seq"] = state.applied + 1
        self.parts.recorder.side(step, ev, rec, ok=not rec["drift"])
        return apply(state, RecordKind.DRIFT, rec), None
