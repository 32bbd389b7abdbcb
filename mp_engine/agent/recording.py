"""What an iteration leaves behind: its record, its evidence (hashed in a manifest), a
learnings entry, and distillation candidates for micro-tasks a higher level solved."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mp_engine.agent import learnings
from mp_engine.agent.chain import model_id
from mp_engine.agent.claims import Claims
from mp_engine.agent.distill import candidate_path, outcome_of, write_candidate
from mp_engine.agent.evidence import IterationEvidence, Snapshot
from mp_engine.agent.invoke import Call
from mp_engine.agent.loopstate import LoopState
from mp_engine.config import AgentLevel
from mp_engine.inbox.mpfile import Block
from mp_engine.record.ledger import LedgerStep, write_artifact


@dataclass(frozen=True)
class IterationCheck(Block):
    """A Validate check as run in one iteration: its own ledger step and output files."""

    prefix: str = ""

    @property
    def check_id(self) -> str:
        return Block.step_id.fget(self)  # type: ignore[attr-defined]

    @property
    def step_id(self) -> str:
        return f"{self.prefix}_{self.check_id}"

    @property
    def script_name(self) -> str:  # one script per check, shared by the iterations
        return self.check_id


CheckRun = tuple[IterationCheck, bool, "int | None"]  # the check, passed, its exit code


def iter_check(block: Block, prefix: str) -> IterationCheck:
    return IterationCheck(block.kind, block.index, block.line, block.body, block.lang, block.path, prefix)


class RecordMixin:
    """Part of `AgentRun` (loop.py)."""

    def record(
        self,
        state: LoopState,
        level: AgentLevel,
        step: LedgerStep,
        ev: IterationEvidence,
        call: Call,
        claims: Claims,
        checks: list[CheckRun],
    ) -> dict[str, Any]:
        """The dual gate (the claim AND every check), the iteration record and its evidence,
        made durable at once (FR-EVT-MT-012, FR-EVT-MT-003)."""
        task = self.plan.tasks[state.mt_index]
        iteration = state.next_iteration
        passed = [c.check_id for c, ok, _ in checks if ok]
        failing = [c.check_id for c, ok, _ in checks if not ok]
        gate = claims.claimed_complete and not failing and not claims.blocked
        self.emit(
            "micro_task_validation",
            "FR-EVT-MT-012",
            mt=task.mt_id,
            iteration=iteration,
            level=state.level,
            claimed=claims.claimed_complete,
            passed=passed,
            failing=failing,
            gate=gate,
        )
        snap = self.worktree.snapshot()
        record = {
            "ok": True,  # the iteration ran to its end; `gate` says whether the MT is done
            "gate": gate,
            "duration": call.duration,
            "mt": task.mt_id,
            "mt_index": task.index,
            "iteration": iteration,
            "level": state.level,
            "level_name": level.name,
            "call": call.to_dict(),
            "claimed": claims.claimed_complete,
            "blocked": claims.blocked and not gate,
            "blocked_reason": claims.blocked_reason,
            "status_ok": claims.status_ok,
            "status_problem": claims.status_problem,
            "work_type": claims.work_type,
            "summary": claims.summary,
            "checks": [{"id": c.check_id, "step": c.step_id, "ok": ok, "exit_code": code} for c, ok, code in checks],
            "passed": passed,
            "failing": failing,
            "residual": len(failing),
            "error": self.error_signature(call, checks),
            "digest": snap.digest,
            "head": snap.head,
            "evidence": ev.rel,
        }
        self.write_evidence(ev, record, claims, snap, checks)
        ref = write_artifact(self.ctx.run.steps_dir, step, record, durable=False)
        self.ctx.ledger.finish(step, ok=True, output_ref=ref)
        self.checkpoint()
        self.budget.charge(call.duration)
        self.remember_checks(record)
        self.emit(
            "micro_task_iteration_complete",
            "FR-EVT-MT-003",
            mt=task.mt_id,
            iteration=iteration,
            level=state.level,
            gate=gate,
            residual=len(failing),
            claimed=claims.claimed_complete,
            call=call.kind,
        )
        return record

    @staticmethod
    def error_signature(call: Call, checks: list[CheckRun]) -> str | None:
        if call.kind != "ok":
            return f"call:{call.kind}"
        failing = [f"{c.check_id}:exit {code}" for c, ok, code in checks if not ok]
        return "|".join(failing) or None

    def write_evidence(
        self,
        ev: IterationEvidence,
        record: dict[str, Any],
        claims: Claims,
        snap: Snapshot,
        checks: list[CheckRun],
    ) -> None:
        ev.add(ev.path("stdout.txt"))
        ev.add(ev.path("stderr.txt"))
        if ev.path("call.json").exists():
            ev.add(ev.path("call.json"))
        ev.write_json("verdict.json", {"claims": claims.to_dict(), "checks": record["checks"], "gate": record["gate"]})
        for chk, _ok, _code in checks:
            for suffix in ("stdout", "stderr", "exit.json"):
                ev.add(self.ctx.run.steps_dir / f"{chk.step_id}.{suffix}")
        ev.write("diff.txt", self.worktree.diffstat(self.base, snap))
        ev.write_manifest()
        checks_text = ", ".join(f"{c['id']} {'ok' if c['ok'] else 'FAILED'}" for c in record["checks"]) or "no checks"
        entry = "\n".join(
            [
                f"### {record['mt']} iteration {record['iteration']}, level {record['level']} ({record['level_name']}): "
                f"residual {record['residual']}{', gate passed' if record['gate'] else ''}",
                f"- Tried: {claims.summary or '(no summary in a valid status block)'}",
                f"- Claimed: {'complete' if claims.claimed_complete else 'blocked' if claims.blocked else 'nothing'}"
                + (f"; status block rejected: {claims.status_problem}" if claims.status_problem else ""),
                f"- Agent call: {record['call']['kind']}"
                + (f" ({record['call']['detail']})" if record["call"]["detail"] else ""),
                f"- Checks: {checks_text}",
                f"- Evidence: {ev.rel}/",
            ]
        )
        learnings.append(
            self.learnings_path,
            f"{record['mt']}_iter-{record['iteration']:03d}",
            entry,
            title=f"# Learnings of {self.mp.mp_id}\n\nOne entry per iteration, written by mp-engine from the evidence.",
            max_bytes=self.cfg.learnings_max_bytes,
        )

    def remember_checks(self, rec: dict[str, Any]) -> None:
        steps = {s.step_id: s for s in self.ctx.ledger.model.steps}
        blocks = {b.step_id: b for b in self.mp.checks}
        self.last_checks = [
            (iter_check(blocks[c["id"]], f"{rec['mt']}_iter-{rec['iteration']:03d}"), steps.get(c["step"]))
            for c in rec.get("checks", [])
            if c["id"] in blocks
        ]

    def distill(self, state: LoopState, mt_index: int, *, emit: bool) -> None:
        task = state.tasks[mt_index]
        levels = state.chains[mt_index]  # the task's own chain (its route, or [agent] levels)
        teacher = task.records[-1]
        failed = [r for r in task.records if not r["gate"]]
        if not failed:
            return
        student_level = min(r["level"] for r in failed)
        student = [r for r in failed if r["level"] == student_level][-1]
        per_level = {}
        for r in failed:
            per_level[r["level"]] = per_level.get(r["level"], 0) + 1
        path = candidate_path(self.ws.system_dir, self.ctx.run.run_id, task.mt_id)
        written = write_candidate(
            path,
            mp_id=self.mp.mp_id,
            run_id=self.ctx.run.run_id,
            mt_id=task.mt_id,
            run_rel=self.run_rel,
            student=student,
            student_model=model_id(levels[student_level]),
            student_iterations=per_level[student_level],
            teacher=teacher,
            teacher_model=model_id(levels[teacher["level"]]),
            teacher_iterations=sum(1 for r in task.records if r["level"] == teacher["level"]),
            failed_levels=[
                {
                    "level": lv,
                    "model_id": model_id(levels[lv]),
                    "iterations": n,
                    "outcome": outcome_of([r for r in failed if r["level"] == lv][-1]),
                }
                for lv, n in sorted(per_level.items())
            ],
            checks_ran=len(teacher.get("checks", [])),
        )
        if written and emit:
            self.emit(
                "micro_task_distillation_candidate",
                "FR-EVT-MT-015",
                mt=task.mt_id,
                iteration=teacher["iteration"],
                level=teacher["level"],
                path=self.ws.rel(path),
            )

    def distilled(self, state: LoopState) -> list[str]:
        out = []
        for t in state.tasks:
            path = candidate_path(self.ws.system_dir, self.ctx.run.run_id, t.mt_id)
            if path.exists():
                out.append(self.ws.rel(path))
        return out
