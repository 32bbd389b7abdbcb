"""Recording what a step of the agent run left behind: an iteration's record (the dual
gate: the claim AND every check), its evidence hashed in a manifest, its learnings entry;
the record of a call that cannot work; a planning round's or drift check's record; and
the distillation candidates of micro-tasks a higher level solved.

One `Recorder` per workspace (a task's worktree, whose snapshot and diff it takes); the
learnings file, the ledger steps and the budget are the run's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mp_engine.agent.call.invoke import NEVER_PASSES, Call
from mp_engine.agent.evidence import IterationEvidence, Snapshot
from mp_engine.agent.judge.checks import CheckRun
from mp_engine.agent.judge.claims import Claims
from mp_engine.agent.prompt import learnings
from mp_engine.agent.scope import RunScope, WorkspaceScope
from mp_engine.core.clock import now_iso
from mp_engine.inbox.metric import measure, read_value
from mp_engine.record.ledger import LedgerStep

if TYPE_CHECKING:
    from mp_engine.agent.run.attempt import Attempt


class Recorder:
    def __init__(self, run: RunScope, place: WorkspaceScope):
        self.run = run
        self.cfg = run.cfg
        self.steps = run.steps
        self.place = place

    # -- an iteration ------------------------------------------------------------------

    def evidence(
        self, a: Attempt, call: Call, claims: Claims, checks: list[CheckRun], protected: list[str] | None = None
    ) -> dict[str, Any]:
        """The iteration's record (the dual gate: the claim AND every check) and its
        evidence, hashed in a manifest: everything of it that is this workspace's, so it
        may run beside other tasks' (in their worker threads). `iteration` places it in
        the run."""
        snap = self.place.worktree.snapshot()
        record = self._verdict(a, call, claims, checks, snap, protected or [])
        ev = a.ev
        ev.add(ev.path("stdout.txt"))
        ev.add(ev.path("stderr.txt"))
        if ev.path("call.json").exists():
            ev.add(ev.path("call.json"))
        ev.write_json("verdict.json", {"claims": claims.to_dict(), "checks": record["checks"], "gate": record["gate"]})
        for chk, _ok, _code in checks:
            for suffix in ("stdout", "stderr", "exit.json"):
                ev.add(self.run.ctx.run.steps_dir / f"{chk.step_id}.{suffix}")
        ev.write("diff.txt", self.place.worktree.diffstat(self.place.base, snap))
        ev.write_manifest()
        return record

    def _verdict(
        self, a: Attempt, call: Call, claims: Claims, checks: list[CheckRun], snap: Snapshot, protected: list[str]
    ) -> dict[str, Any]:
        """Long because it is the record, field by field."""
        passed = [c.check_id for c, ok, _ in checks if ok]
        # A changed file that judges the work is a failure of its own (issue #42), never progress.
        failing = [c.check_id for c, ok, _ in checks if not ok] + (["protected_path"] if protected else [])
        steps_dir = self.run.ctx.run.steps_dir
        measured = [
            (c.check_id, c.metric, read_value(steps_dir / f"{c.step_id}.stdout"))
            for c, _ok, _code in checks
            if c.metric is not None
        ]
        metrics = [{"id": k, **measure(metric, value)} for k, metric, value in measured]
        # What is left: 1 per failing check, a failing metric check its distance to the target
        # (in (0, 1]; inbox/metric.py), so an agent getting closer shows as a smaller residual.
        distance = {k: metric.distance(value) for k, metric, value in measured}
        residual = round(sum(distance.get(k, 1) for k in failing), 6)
        gate = claims.claimed_complete and not failing and not claims.blocked and call.kind not in NEVER_PASSES
        return {
            "ok": True,  # the iteration ran to its end; `gate` says whether the MT is done
            "gate": gate,
            "duration": call.duration,
            "mt": a.mt_id,
            "mt_index": a.mt_index,
            "iteration": a.iteration,
            "level": a.level_index,
            "level_name": a.level.name,
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
            **({"protected": protected} if protected else {}),
            "error": error_signature(call, checks, protected),
            "digest": snap.digest,
            "head": snap.head,
            "evidence": a.ev.rel,
        }

    def iteration(self, record: dict[str, Any], step: LedgerStep, *, seq: int) -> dict[str, Any]:
        """The record placed in the run, in the order the run applies it (`seq`): its
        learnings entry, its ledger step finished durably, its events (FR-EVT-MT-012,
        FR-EVT-MT-003)."""
        where = {"mt": record["mt"], "iteration": record["iteration"], "level": record["level"]}
        self.run.emit(
            "micro_task_validation",
            id="FR-EVT-MT-012",
            **where,
            claimed=record["claimed"],
            passed=record["passed"],
            failing=record["failing"],
            gate=record["gate"],
        )
        record = {**record, "seq": seq, "at": now_iso()}
        self._learnings(record)
        self.steps.finish(step, record, ok=True)
        self.run.emit(
            "micro_task_iteration_complete",
            id="FR-EVT-MT-003",
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
                *(
                    [f"- Changed what judges the work (restored): {', '.join(record['protected'])}"]
                    if record.get("protected")
                    else []
                ),
                f"- Evidence: {record['evidence']}/",
            ]
        )
        learnings.append(
            self.run.learnings,
            f"{record['mt']}_iter-{record['iteration']:03d}",
            entry,
            title=f"# Learnings of {self.run.mp.mp_id}\n\nOne entry per iteration, written by mp-engine from the evidence.",
            max_bytes=self.cfg.learnings_max_bytes,
        )

    # -- a call that cannot work, a planning round, a drift check ----------------------

    def fatal(
        self, a: Attempt, call: Call, why: tuple[str, str, str], *, mt_id: str | None, iteration: int, seq: int
    ) -> dict[str, Any]:
        """The record of a call that ends the run (`why`: reason, detail, fix); `mt_id` and
        `iteration` place it (a planning round's: the task in focus)."""
        reason, detail, fix = why
        record = {
            "ok": False,
            "gate": False,
            "duration": call.duration,
            "mt": mt_id,
            "mt_index": a.mt_index,
            "seq": seq,
            "iteration": iteration,
            "level": a.level_index,
            "call": call.to_dict(),
            "evidence": a.ev.rel,
            "fatal": {"reason": reason, "detail": detail, "fix": fix},
        }
        a.ev.add(a.ev.path("stdout.txt"))
        a.ev.add(a.ev.path("stderr.txt"))
        a.ev.write_manifest()
        self.steps.finish(a.step, record, ok=False, error=detail)
        return record

    def side(self, step: LedgerStep, ev: IterationEvidence, rec: dict[str, Any], *, ok: bool) -> None:
        """A planning round's or drift check's record, its evidence and manifest."""
        for out in ("stdout.txt", "stderr.txt", "call.json"):
            if ev.path(out).exists():
                ev.add(ev.path(out))
        ev.write_json("record.json", rec)
        ev.write_manifest()
        self.steps.finish(step, rec, ok=ok, error=rec.get("invalid"))


def error_signature(call: Call, checks: list[CheckRun], protected: list[str] | None = None) -> str | None:
    """What an iteration failed on, for the same-error breaker."""
    if call.kind != "ok":
        return f"call:{call.kind}"
    failing = [f"{c.check_id}:exit {code}" for c, ok, code in checks if not ok]
    failing += [f"protected_path:{p}" for p in protected or []]
    return "|".join(failing) or None
