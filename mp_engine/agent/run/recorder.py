"""Recording what a step of the agent run left behind: an iteration's record (the dual
gate: the claim AND every check), its evidence hashed in a manifest, its learnings entry;
the record of a call that cannot work; a planning round's or drift check's record; and
the distillation candidates of micro-tasks a higher level solved.

One `Recorder` per workspace (a task's worktree, whose snapshot and diff it takes); the
learnings file, the ledger steps and the budget are the run's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mp_engine.agent.call.invoke import Call
from mp_engine.agent.evidence import IterationEvidence, Snapshot, Worktree
from mp_engine.agent.judge.checks import CheckRun
from mp_engine.agent.judge.claims import Claims
from mp_engine.agent.prompt import learnings
from mp_engine.agent.run.steps import AgentSteps
from mp_engine.agent.state.model import Emit
from mp_engine.config import AgentConfig, AgentLevel
from mp_engine.core.clock import now_iso
from mp_engine.execute.steps import Budget
from mp_engine.inbox.metric import measure, read_value
from mp_engine.record.ledger import LedgerStep


class Recorder:
    def __init__(
        self,
        cfg: AgentConfig,
        *,
        mp_id: str,
        run_dir: Path,
        steps: AgentSteps,
        budget: Budget,
        worktree: Worktree,
        base: Snapshot,
        learnings_path: Path,
        emit: Emit,
    ):
        self.cfg = cfg
        self.mp_id = mp_id
        self.run_dir = run_dir
        self.steps = steps
        self.budget = budget
        self.worktree = worktree
        self.base = base
        self.learnings_path = learnings_path
        self.emit = emit

    # -- an iteration ------------------------------------------------------------------

    def evidence(
        self,
        *,
        mt_id: str,
        mt_index: int,
        iteration: int,
        level_index: int,
        level: AgentLevel,
        ev: IterationEvidence,
        call: Call,
        claims: Claims,
        checks: list[CheckRun],
    ) -> dict[str, Any]:
        """The iteration's record (the dual gate: the claim AND every check) and its
        evidence, hashed in a manifest: everything of it that is this workspace's, so it
        may run beside other tasks' (in their worker threads). `iteration` places it in
        the run."""
        passed = [c.check_id for c, ok, _ in checks if ok]
        failing = [c.check_id for c, ok, _ in checks if not ok]
        metrics = [
            {"id": c.check_id, **measure(c.metric, read_value(self.steps.steps_dir / f"{c.step_id}.stdout"))}
            for c, _ok, _code in checks
            if c.metric is not None
        ]
        # What is left: 1 per failing check, a failing metric check its distance to the target
        # (in (0, 1]; inbox/metric.py), so an agent getting closer shows as a smaller residual.
        distance = {m["id"]: m["distance"] for m in metrics}
        residual = round(sum(distance.get(k, 1) for k in failing), 6)
        gate = claims.claimed_complete and not failing and not claims.blocked
        snap = self.worktree.snapshot()
        record = {
            "ok": True,  # the iteration ran to its end; `gate` says whether the MT is done
            "gate": gate,
            "duration": call.duration,
            "mt": mt_id,
            "mt_index": mt_index,
            "iteration": iteration,
            "level": level_index,
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
            "residual": int(residual) if residual == int(residual) else residual,
            # Every command of the call failed for a reason outside the task (structured.py).
            **({"environment": call.environment} if call.environment else {}),
            **({"metrics": metrics} if metrics else {}),
            "error": error_signature(call, checks),
            "digest": snap.digest,
            "head": snap.head,
            "evidence": ev.rel,
        }
        ev.add(ev.path("stdout.txt"))
        ev.add(ev.path("stderr.txt"))
        if ev.path("call.json").exists():
            ev.add(ev.path("call.json"))
        ev.write_json("verdict.json", {"claims": claims.to_dict(), "checks": record["checks"], "gate": gate})
        for chk, _ok, _code in checks:
            for suffix in ("stdout", "stderr", "exit.json"):
                ev.add(self.steps.steps_dir / f"{chk.step_id}.{suffix}")
        ev.write("diff.txt", self.worktree.diffstat(self.base, snap))
        ev.write_manifest()
        return record

    def iteration(self, record: dict[str, Any], step: LedgerStep, *, seq: int) -> dict[str, Any]:
        """The record placed in the run, in the order the run applies it (`seq`): its
        learnings entry, its ledger step finished durably, its events (FR-EVT-MT-012,
        FR-EVT-MT-003)."""
        where = {"mt": record["mt"], "iteration": record["iteration"], "level": record["level"]}
        self.emit(
            "micro_task_validation",
            "FR-EVT-MT-012",
            **where,
            claimed=record["claimed"],
            passed=record["passed"],
            failing=record["failing"],
            gate=record["gate"],
        )
        record = {**record, "seq": seq, "at": now_iso()}
        self._learnings(record)
        self.steps.finish(step, record, ok=True)
        self.budget.charge(record["duration"])
        self.emit(
            "micro_task_iteration_complete",
            "FR-EVT-MT-003",
            **where,
            gate=record["gate"],
            residual=record["residual"],
            claimed=record["claimed"],
            call=record["call"]["kind"],
            level_name=record["level_name"],
            usage=record["call"].get("usage"),
        )
        return record

    def _learnings(self, record: dict[str, Any]) -> None:
        """The iteration's entry in the learnings file, written from the evidence."""
        checks_text = ", ".join(f"{c['id']} {'ok' if c['ok'] else 'FAILED'}" for c in record["checks"]) or "no checks"
        claimed = "complete" if record["claimed"] else "blocked" if record["blocked"] else "nothing"
        entry = "\n".join(
            [
                f"### {record['mt']} iteration {record['iteration']}, level {record['level']} ({record['level_name']}): "
                f"residual {record['residual']}{', gate passed' if record['gate'] else ''}",
                f"- Tried: {record['summary'] or '(no summary in a valid status block)'}",
                f"- Claimed: {claimed}"
                + (f"; status block rejected: {record['status_problem']}" if record["status_problem"] else ""),
                f"- Agent call: {record['call']['kind']}"
                + (f" ({record['call']['detail']})" if record["call"]["detail"] else ""),
                f"- Checks: {checks_text}",
                f"- Evidence: {record['evidence']}/",
            ]
        )
        learnings.append(
            self.learnings_path,
            f"{record['mt']}_iter-{record['iteration']:03d}",
            entry,
            title=f"# Learnings of {self.mp_id}\n\nOne entry per iteration, written by mp-engine from the evidence.",
            max_bytes=self.cfg.learnings_max_bytes,
        )

    # -- a call that cannot work, a planning round, a drift check ----------------------

    def fatal(
        self,
        step: LedgerStep,
        ev: IterationEvidence,
        call: Call,
        why: tuple[str, str, str],
        *,
        mt_id: str | None,
        mt_index: int | None,
        iteration: int,
        level_index: int,
        seq: int,
    ) -> dict[str, Any]:
        """The record of a call that ends the run (`why`: reason, detail, fix)."""
        reason, detail, fix = why
        record = {
            "ok": False,
            "gate": False,
            "duration": call.duration,
            "mt": mt_id,
            "mt_index": mt_index,
            "seq": seq,
            "iteration": iteration,
            "level": level_index,
            "call": call.to_dict(),
            "evidence": ev.rel,
            "fatal": {"reason": reason, "detail": detail, "fix": fix},
        }
        ev.add(ev.path("stdout.txt"))
        ev.add(ev.path("stderr.txt"))
        ev.write_manifest()
        self.steps.finish(step, record, ok=False, error=detail)
        self.budget.charge(call.duration)
        return record

    def side(
        self, step: LedgerStep, ev: IterationEvidence, rec: dict[str, Any], call: Call | None, *, ok: bool
    ) -> None:
        """A planning round's or drift check's record, its evidence and manifest."""
        for out in ("stdout.txt", "stderr.txt", "call.json"):
            if ev.path(out).exists():
                ev.add(ev.path(out))
        ev.write_json("record.json", rec)
        ev.write_manifest()
        self.steps.finish(step, rec, ok=ok, error=rec.get("invalid"))
        if call is not None:
            self.budget.charge(call.duration)


def error_signature(call: Call, checks: list[CheckRun]) -> str | None:
    """What an iteration failed on, for the same-error breaker."""
    if call.kind != "ok":
        return f"call:{call.kind}"
    failing = [f"{c.check_id}:exit {code}" for c, ok, code in checks if not ok]
    return "|".join(failing) or None




