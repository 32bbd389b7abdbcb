"""The agent executor: drive a coding-agent CLI through a bounded, verified loop.

One iteration (docs/AGENT.md): build a fresh prompt from artifacts, call the level's CLI,
parse its untrusted claims, run the MP's checks ourselves, record the evidence and a
learnings entry, then let `LoopState` decide (micro-task done, escalate, breaker, ...).
Each iteration is one ledger step `MT-001_iter-002` whose idempotency key hashes the MT
id, iteration, level and prompt; its artifact is the iteration record, so an iteration
that finished is never run again, and the state after a restart is the replay of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mp_engine.agent import certificate as cert
from mp_engine.agent import learnings, prompt
from mp_engine.agent.breakers import CallLimiter
from mp_engine.agent.chain import describe, model_id, render_argv, runnable
from mp_engine.agent.claims import Claims, parse_claims
from mp_engine.agent.decompose import Plan, decompose
from mp_engine.agent.distill import candidate_path, outcome_of, write_candidate
from mp_engine.agent.evidence import IterationEvidence, Snapshot, Worktree
from mp_engine.agent.invoke import Call, classify, run_agent
from mp_engine.agent.loopstate import Effect, LoopState
from mp_engine.agent.progress import BASELINE_FILE, Progress
from mp_engine.agent.report import sections
from mp_engine.atomic import atomic_write_json
from mp_engine.config import AgentLevel
from mp_engine.errors import InvalidMPError
from mp_engine.executors.base import ExecResult
from mp_engine.ledger import LedgerStep, StepStatus, idempotency_key, read_artifact, write_artifact
from mp_engine.mpfile import Block, MicroProject
from mp_engine.process import proc_stat, scrub_env
from mp_engine.result import read_capped
from mp_engine.steps import Budget, StepContext, error_output, report_for, run_block

STOP_FILE = "STOP"
OUTPUT_READ_CAP = 1024 * 1024


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


def _iter_check(block: Block, prefix: str) -> IterationCheck:
    return IterationCheck(block.kind, block.index, block.line, block.body, block.lang, block.path, prefix)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class AgentExecutor:
    name = "agent"

    def validate(self, mp: MicroProject) -> None:
        if not decompose(mp).tasks:
            raise InvalidMPError(
                "the agent MP has no instructions: nothing but the header and checks",
                "Write what the agent should do under the title, as a paragraph or a numbered list.",
                mp_id=mp.mp_id,
            )

    def run(self, ctx: StepContext) -> ExecResult:
        return AgentRun(ctx).run()


class AgentRun:
    """One MP's loop; rebuilt from the run archive on every (re-)entry."""

    def __init__(self, ctx: StepContext):
        self.cfg = ctx.config.agent
        self.levels = self.cfg.levels
        self.mp = ctx.mp
        self.plan: Plan = decompose(ctx.mp)
        if "Timeout" in ctx.mp.headers:
            total, source = float(ctx.mp.headers["Timeout"]), "the MP's `Timeout:`"
        else:
            total, source = self.cfg.wall_budget, "`[agent] wall_budget`"
        self.budget = Budget(total, source, ctx.budget.used)
        self.ctx = replace(ctx, budget=self.budget)
        # Checks of an iteration whose agent call finished run to the end on a first stop
        # signal (the iteration is "the current step"); a second signal still kills them.
        self.checks_ctx = replace(self.ctx, stop=threading.Event())
        self.ws = ctx.ws
        self.run_dir = ctx.run.dir
        self.run_rel = ctx.ws.rel(ctx.run.dir)
        self.worktree = Worktree(ctx.ws.root)
        self.limiter = CallLimiter(ctx.ws.local_dir / "agent_calls.log", self.cfg.calls_per_hour)
        self.learnings_path = self.run_dir / "agent" / "learnings.md"
        self.last_checks: list[tuple[IterationCheck, LedgerStep | None]] = []
        self.fatal_fix: str | None = None  # the proposed fix when the agent CLI cannot work

    # -- events ----------------------------------------------------------------------

    def emit(self, name: str, event_id: str, **fields: Any) -> None:
        self.ctx.events.emit(name, id=event_id, mp=self.mp.mp_id, run=self.ctx.run.run_id, **fields)

    def where(self, state: LoopState) -> dict[str, Any]:
        task = state.task
        return {"mt": task.mt_id if task else None, "iteration": state.next_iteration, "level": state.level}

    # -- the loop --------------------------------------------------------------------

    def run(self) -> ExecResult:
        if not runnable(self.levels):
            return self.need_info("no_levels", "No agent is configured: `[agent] levels` in mp-engine.toml is empty.")
        if not self.mp.checks and self.cfg.require_checks:
            return self.need_info(
                "no_checks",
                "The MP has no Validate checks, and `[agent] require_checks` is on: without checks "
                "nothing could prove the agent's work, and its word alone never suffices.",
            )
        progress = Progress.load(self.run_dir)
        fresh = progress is None
        if progress is None:
            base = self.worktree.snapshot()
            (self.run_dir / "agent").mkdir(exist_ok=True)
            atomic_write_json(self.run_dir / BASELINE_FILE, {"head": base.head, "files": base.files}, durable=False)
            progress = Progress.create(
                self.run_dir,
                mp_id=self.mp.mp_id,
                run_id=self.ctx.run.run_id,
                policy=self.cfg.model_dump(mode="json"),
                tasks=self.plan.summary(self.mp),
                base={"head": base.head, "digest": base.digest},
            )
        else:
            raw = json.loads((self.run_dir / BASELINE_FILE).read_text(encoding="utf-8"))
            base = Snapshot(raw["head"], raw["files"])
        self.progress = progress
        self.base = base
        state = LoopState(self.cfg, self.plan, progress.data["base"]["digest"])
        self.replay(state)
        if fresh:
            self.emit(
                "micro_task_loop_started",
                "FR-EVT-MT-001",
                **self.where(state),
                micro_tasks=[t.mt_id for t in self.plan.tasks],
                levels=[lv.name for lv in self.levels],
            )
        else:
            self.report_resume(state)
        # Per-iteration writes skip fsync; `checkpoint()` makes each finished iteration
        # durable at once (a power loss costs at most the running iteration).
        self.ctx.ledger.durable, self.ctx.ledger.deferred = False, True
        try:
            while state.final is None:
                paused = self.iterate(state)
                if paused is not None:
                    return paused
            return self.finish(state)
        finally:
            self.ctx.ledger.durable, self.ctx.ledger.deferred = True, False
            self.ctx.events.sync()
            self.ctx.ledger.save(durable=True)

    def replay(self, state: LoopState) -> None:
        """Rebuild the loop state from the iteration records in the ledger."""
        for step in self.ctx.ledger.model.steps:
            if state.final is not None:
                return
            if step.kind != "agent" or step.status not in (StepStatus.COMPLETED, StepStatus.FAILED):
                continue
            rec = read_artifact(self.ctx.run.steps_dir, step)
            if rec is None or "mt" not in rec:
                continue
            if rec.get("fatal"):
                state.end(cert.BLOCKED, rec["fatal"]["reason"], rec["fatal"]["detail"])
                self.fatal_fix = rec["fatal"]["fix"]
            else:
                state.apply(rec)
            self.remember_checks(rec)

    def report_resume(self, state: LoopState) -> None:
        """After a pause or a crash: say where the loop resumes (FR-EVT-MT-008, WF-RECOVERY)."""
        pause = self.progress.resumed()
        if pause is not None:
            self.emit("micro_task_resumed", "FR-EVT-MT-008", **self.where(state), after=pause.get("kind"))
        recoveries = self.ctx.ledger.model.recoveries
        seen = self.progress.data.get("recoveries_seen", 0)
        for rec in recoveries[seen:]:
            self.emit(
                "workflow_recovery",
                "FR-EVT-WF-RECOVERY",
                **self.where(state),
                resume_point=self.step_id(state) if state.task else None,
                steps_recovered=rec["steps_recovered"],
                steps_to_retry=rec["steps_to_retry"],
                reason=rec["reason"],
            )
        self.progress.data["recoveries_seen"] = len(recoveries)
        for i, task in enumerate(state.tasks):  # a crash may have come between success and candidate
            if task.status == "completed" and (task.final_level or 0) > 0:
                self.distill(state, i, emit=False)
        self.progress.save()

    def step_id(self, state: LoopState) -> str:
        assert state.task is not None
        return f"{state.task.mt_id}_iter-{state.next_iteration:03d}"

    # -- one iteration -------------------------------------------------------------------

    def iterate(self, state: LoopState) -> ExecResult | None:
        """Run one iteration; return an ExecResult only to pause (stop, wait)."""
        ctx, cfg = self.ctx, self.cfg
        task = self.plan.tasks[state.mt_index]
        if ctx.stop.is_set() or ctx.stop_now.is_set():
            return self.pause(
                state, "stop", "a stop signal (SIGTERM/SIGINT); the loop resumes when the engine restarts"
            )
        if (self.ws.system_dir / STOP_FILE).exists():
            state.end(
                cert.BACKPRESSURE,
                "stop_file",
                f"SYSTEM/{STOP_FILE} was found before {task.mt_id} iteration {state.next_iteration}; "
                "the loop stopped as asked.",
            )
            return None
        if self.budget.remaining() <= 0:
            state.end(
                cert.TIMEOUT,
                "wall_budget",
                f"The {self.budget.total:g} s budget ({self.budget.source}) was spent before {task.mt_id} passed.",
            )
            return None
        if state.total >= cfg.max_iterations:
            state.end(
                cert.TIMEOUT,
                "max_iterations",
                f"All {cfg.max_iterations} iterations (`[agent] max_iterations`) were spent before {task.mt_id} passed.",
            )
            return None
        slot = self.limiter.next_slot(time.time())
        if slot is not None:
            return self.wait(
                state,
                "rate_limit",
                f"{cfg.calls_per_hour} agent calls in the last hour (`[agent] calls_per_hour`)",
                _iso(slot),
            )

        level: AgentLevel = self.levels[state.level]
        iteration = state.next_iteration
        step_id = self.step_id(state)
        ev = IterationEvidence(self.run_dir, task.mt_id, iteration)
        prompt_path = ev.path("prompt.md")
        existing = ctx.ledger.step(step_id)
        if existing is not None and prompt_path.exists():  # a retry: the same prompt, the same key
            text = prompt_path.read_text(encoding="utf-8")
            ev.add(prompt_path, text.encode("utf-8"))
        else:
            text = self.build_prompt(state, task.index, iteration, level)
            ev.write("prompt.md", text)
        key = idempotency_key(task.mt_id, str(iteration), str(state.level), hashlib.sha256(text.encode()).hexdigest())
        step = ctx.ledger.ensure_step(step_id, "agent", key)
        step.idempotency_key = key
        ctx.ledger.start(step)
        self.publish(state, live=True)
        self.emit(
            "micro_task_iteration_started",
            "FR-EVT-MT-002",
            mt=task.mt_id,
            iteration=iteration,
            level=state.level,
            agent=level.name,
        )

        call = self.call(state, level, step, ev, task.mt_id, iteration)
        if call.kind == "interrupted":
            self.release(step)
            return self.pause(state, "stop", "a second stop signal killed the agent call; the iteration is retried")
        if call.kind == "usage_limit":
            self.release(step)
            assert call.resume_at is not None
            return self.wait(state, "usage_limit", call.detail or "the provider's usage limit", call.resume_at)
        if call.kind in ("auth", "not_found", "transient"):
            self.fatal(state, step, ev, call, level)
            return None

        output = self.read_output(ev)
        claims = parse_claims(output, self.progress.nonce)
        checks = []
        for block in self.plan.checks_for(self.mp, task.index):
            chk = _iter_check(block, step_id)
            run = run_block(self.checks_ctx, chk)
            if run.interrupted:
                self.release(step)
                return self.pause(
                    state, "stop", "a second stop signal interrupted the checks; the iteration is retried"
                )
            checks.append((chk, run.ok, run.report.exit_code))
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
        ref = write_artifact(ctx.run.steps_dir, step, record, durable=False)
        ctx.ledger.finish(step, ok=True, output_ref=ref)
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
        self.act(state, state.apply(record))
        # No publish here: the next iteration publishes as it starts, and the end of the
        # loop or a pause publishes too.
        return None

    def build_prompt(self, state: LoopState, mt_index: int, iteration: int, level: AgentLevel) -> str:
        task = self.plan.tasks[mt_index]
        checks = self.plan.checks_for(self.mp, mt_index)
        ts = state.tasks[mt_index]
        previous = ts.records[-1] if ts.records else None
        tails: dict[str, str] = {}
        if previous is not None:
            cap = self.cfg.output_tail_bytes
            for c in previous["checks"]:
                if not c["ok"]:
                    parts = []
                    for suffix in ("stdout", "stderr"):
                        path = self.ctx.run.steps_dir / f"{c['step']}.{suffix}"
                        parts.append(_tail(path, cap))
                    tails[c["id"]] = "\n".join(p for p in parts if p)[-cap:]
        last = state.level + 1 >= len(self.levels)  # nowhere to escalate to
        return prompt.build(
            mp=self.mp,
            plan=self.plan,
            task=task,
            iteration=iteration,
            level=state.level,
            level_name=level.name,
            nonce=self.progress.nonce,
            workspace=str(self.ws.root),
            checks=checks,
            previous=previous,
            tails=tails,
            learnings=learnings.read(self.learnings_path),
            budget=prompt.Budget(
                iterations_left=self.cfg.max_iterations - state.total,
                max_iterations=self.cfg.max_iterations,
                seconds_left=self.budget.remaining(),
                seconds_total=self.budget.total,
                fails_before_escalation=None if last else self.cfg.fail_threshold - state.fails_at_level,
            ),
        )

    # -- the agent call ------------------------------------------------------------------

    def call(
        self, state: LoopState, level: AgentLevel, step: LedgerStep, ev: IterationEvidence, mt_id: str, iteration: int
    ) -> Call:
        """Call the agent (retrying transient outages), unless this iteration's call
        already finished before a crash: then its recorded outcome is used."""
        call_file = ev.path("call.json")
        try:
            done = json.loads(call_file.read_text(encoding="utf-8"))
            if done.get("idempotency_key") == step.idempotency_key:
                return Call.from_dict(done["call"])
        except (FileNotFoundError, ValueError):
            pass
        prompt_file = ev.path("prompt.md")
        values = {
            "prompt": prompt_file.read_text(encoding="utf-8"),
            "prompt_file": str(prompt_file),
            "workspace": str(self.ws.root),
            "mt_id": mt_id,
        }
        argv = render_argv(level, values)
        env = scrub_env(
            level.env_allow,
            extra={
                "MP_ID": self.mp.mp_id,
                "MP_MT": mt_id,
                "MP_ITERATION": str(iteration),
                "MP_LEVEL": str(state.level),
                "MP_WORKSPACE": str(self.ws.root),
                "MP_RUN_DIR": str(self.run_dir),
                "MP_PROMPT_FILE": str(prompt_file),
            },
        )

        def spawned(pid: int) -> None:
            info = proc_stat(pid)
            self.ctx.ledger.spawned(step, pid, info[1] if info else None)

        retries = 0
        while True:
            _rotate(ev.path("stdout.txt"), ev.path("stderr.txt"))
            self.limiter.record(time.time())
            res = run_agent(
                argv,
                cwd=self.ws.root,
                env=env,
                timeout=max(0.1, min(level.timeout, self.budget.remaining())),
                idle_timeout=level.idle_timeout,
                stdout_path=ev.path("stdout.txt"),
                stderr_path=ev.path("stderr.txt"),
                stdin_path=prompt_file if level.stdin else None,
                stop_now=self.ctx.stop_now,
                kill_grace=self.ctx.config.execution.kill_grace,
                on_spawn=spawned,
            )
            text = _tail(ev.path("stdout.txt"), 64 * 1024) + "\n" + _tail(ev.path("stderr.txt"), 64 * 1024)
            call = classify(
                res,
                text,
                status_seen="---LOOPR_STATUS---" in text,
                now=datetime.now(UTC),
                fallback_wait=self.cfg.usage_limit_wait,
            )
            if call.kind != "transient" or retries >= self.cfg.transient_retries:
                break
            delay = self.cfg.transient_backoff * (2**retries)
            retries += 1
            self.ctx.events.emit(
                "agent_call_retry",
                mp=self.mp.mp_id,
                mt=mt_id,
                iteration=iteration,
                level=state.level,
                detail=call.detail,
                retry=retries,
                delay=delay,
            )
            if self.ctx.stop.wait(delay) or self.ctx.stop_now.is_set():
                return Call("interrupted", detail="stopped while waiting to retry")
        if call.kind not in ("interrupted", "usage_limit"):
            atomic_write_json(
                call_file, {"idempotency_key": step.idempotency_key, "call": call.to_dict()}, durable=False
            )
        return call

    def checkpoint(self) -> None:
        """Make the finished iteration's ledger entry durable (one fsync, not one per file).

        Everything else of the iteration (record, evidence, events) is written without
        fsync: it survives `kill -9`. After a power loss, an iteration whose record did not
        reach the disk has no artifact, so recovery runs it again (same prompt, same key)."""
        self.ctx.ledger.save(durable=True)

    def read_output(self, ev: IterationEvidence) -> str:
        out, _ = read_capped(ev.path("stdout.txt"), OUTPUT_READ_CAP)
        err, _ = read_capped(ev.path("stderr.txt"), OUTPUT_READ_CAP // 4)
        return out + "\n" + err

    def release(self, step: LedgerStep) -> None:
        """Put a started iteration back to pending: it runs again, with the same prompt."""
        step.status = StepStatus.PENDING
        step.pgid = step.proc_start = None
        self.ctx.ledger.save()

    def fatal(self, state: LoopState, step: LedgerStep, ev: IterationEvidence, call: Call, level: AgentLevel) -> None:
        """The agent CLI cannot work (not installed, not logged in, provider down)."""
        task = state.task
        assert task is not None
        cmd = level.argv[0] if level.argv else level.name
        reason, detail, fix = {
            "not_found": (
                "agent_not_found",
                f"The agent CLI of {describe(self.levels, state.level)} could not run: {call.detail}.",
                f"Install `{cmd}` on the engine host (on the daemon's PATH) or correct the argv of level "
                f"{level.name!r} in `[agent] levels`, then send the MP again with `Approves: {self.mp.mp_id}`.",
            ),
            "auth": (
                "agent_auth",
                f"The agent CLI of {describe(self.levels, state.level)} is not authenticated: {call.detail}.",
                f"Log `{cmd}` in as the engine's user (or pass its API key variable through the level's "
                f"`env_allow`), then send the MP again with `Approves: {self.mp.mp_id}`.",
            ),
            "transient": (
                "agent_unavailable",
                f"The agent's provider stayed unavailable after {self.cfg.transient_retries} retries: {call.detail}.",
                f"Wait until the provider is back (its status page), then send the MP again with `Approves: {self.mp.mp_id}`.",
            ),
        }[call.kind]
        record = {
            "ok": False,
            "gate": False,
            "duration": call.duration,
            "mt": task.mt_id,
            "iteration": state.next_iteration,
            "level": state.level,
            "call": call.to_dict(),
            "evidence": ev.rel,
            "fatal": {"reason": reason, "detail": detail, "fix": fix},
        }
        ev.add(ev.path("stdout.txt"))
        ev.add(ev.path("stderr.txt"))
        ev.write_manifest()
        ref = write_artifact(self.ctx.run.steps_dir, step, record, durable=False)
        self.ctx.ledger.finish(step, ok=False, output_ref=ref, error=detail)
        self.checkpoint()
        self.budget.charge(call.duration)
        state.end(cert.BLOCKED, reason, detail)
        self.fatal_fix = fix

    # -- evidence ------------------------------------------------------------------------

    @staticmethod
    def error_signature(call: Call, checks: list[tuple[IterationCheck, bool, int | None]]) -> str | None:
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
        checks: list[tuple[IterationCheck, bool, int | None]],
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
            (_iter_check(blocks[c["id"]], f"{rec['mt']}_iter-{rec['iteration']:03d}"), steps.get(c["step"]))
            for c in rec.get("checks", [])
            if c["id"] in blocks
        ]

    # -- decisions -----------------------------------------------------------------------

    def act(self, state: LoopState, effects: list[Effect]) -> None:
        for e in effects:
            if e.kind == "event":
                self.emit(e.name, e.event_id, **e.fields)
            elif e.kind == "distill":
                self.distill(state, e.fields["mt_index"], emit=True)

    def distill(self, state: LoopState, mt_index: int, *, emit: bool) -> None:
        task = state.tasks[mt_index]
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
            student_model=model_id(self.levels[student_level]),
            student_iterations=per_level[student_level],
            teacher=teacher,
            teacher_model=model_id(self.levels[teacher["level"]]),
            teacher_iterations=sum(1 for r in task.records if r["level"] == teacher["level"]),
            failed_levels=[
                {
                    "level": lv,
                    "model_id": model_id(self.levels[lv]),
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

    # -- pauses ------------------------------------------------------------------------------

    def pause(self, state: LoopState, kind: str, reason: str) -> ExecResult:
        self.progress.pause(kind, reason)
        self.emit("micro_task_pause_requested", "FR-EVT-MT-007", **self.where(state), kind=kind, reason=reason)
        self.publish(state)
        return ExecResult(status="interrupted")

    def wait(self, state: LoopState, kind: str, reason: str, resume_at: str) -> ExecResult:
        """BACKPRESSURE that pauses: persist `resume_at`; the engine re-enters after it."""
        self.progress.pause(kind, reason, resume_at)
        self.emit(
            "micro_task_pause_requested",
            "FR-EVT-MT-007",
            **self.where(state),
            kind=kind,
            reason=reason,
            resume_at=resume_at,
        )
        self.publish(state)
        return ExecResult(status="waiting", extra={"waiting": {"kind": kind, "reason": reason, "resume_at": resume_at}})

    # -- status and the end --------------------------------------------------------------------

    def publish(self, state: LoopState, *, live: bool = False) -> None:
        """Write the progress snapshot (what `mp-engine status` shows)."""
        task = state.task
        now = time.time()
        current = {
            "active_mt": task.mt_id if task else None,
            "mt_number": state.mt_index + 1 if task else None,
            "micro_tasks": len(state.tasks),
            "iteration": (task.iterations + (1 if live else 0)) if task else None,
            "level": state.level,
            "level_name": self.levels[state.level].name if state.level < len(self.levels) else None,
            "residual": state.residual,
            "total_iterations": state.total,
            "iterations_left": self.cfg.max_iterations - state.total,
            "budget_seconds_left": round(self.budget.remaining(), 1),
            "budget_seconds_total": self.budget.total,
            "budget_source": self.budget.source,
            "total_escalations": state.escalations,
            "total_drop_backs": state.drop_backs,
            "calls_last_hour": self.limiter.used(now),
            "calls_per_hour": self.cfg.calls_per_hour,
            "breakers": state.breakers.to_dict(),
        }
        self.progress.data["current_state"] = current
        self.progress.data["micro_tasks"] = [t.to_dict() for t in state.tasks]
        self.progress.data["residual_history"] = state.history
        self.progress.save()

    def need_info(self, reason: str, detail: str) -> ExecResult:
        c = cert.Certificate(cert.NEED_INFO, reason, detail, mt=None)
        (self.run_dir / "agent").mkdir(exist_ok=True)
        atomic_write_json(self.run_dir / "agent" / "certificate.json", c.to_dict())
        self.ctx.events.emit(
            "micro_task_loop_failed",
            id="FR-EVT-MT-010",
            mp=self.mp.mp_id,
            run=self.ctx.run.run_id,
            certificate=c.type,
            reason=reason,
        )
        return ExecResult(
            status="failed",
            diagnosis=cert.diagnosis(c, self.mp.mp_id),
            extra={"certificate": c.to_dict(), "sections": sections(c, None, self.plan, self.run_rel, [])},
        )

    def finish(self, state: LoopState) -> ExecResult:
        c = state.final
        assert c is not None
        p = self.progress
        p.data["certificate"] = c.to_dict()
        p.data["status"] = {cert.EXACT: "completed", cert.BACKPRESSURE: "cancelled"}.get(c.type, "failed")
        p.data["completed_at"] = p.data["updated_at"]
        self.publish(state)
        p.save(durable=True)
        atomic_write_json(self.run_dir / "agent" / "certificate.json", c.to_dict())
        name, event_id = {
            cert.EXACT: ("micro_task_loop_completed", "FR-EVT-MT-009"),
            cert.BACKPRESSURE: ("micro_task_loop_cancelled", "FR-EVT-MT-011"),
        }.get(c.type, ("micro_task_loop_failed", "FR-EVT-MT-010"))
        self.emit(
            name,
            event_id,
            mt=c.mt,
            iteration=state.tasks[state.mt_index].iterations if state.task else None,
            level=state.level,
            certificate=c.type,
            reason=c.reason,
            iterations=state.total,
        )
        checks = [report_for(self.ctx, chk, step) for chk, step in self.last_checks]
        extra = {
            "certificate": c.to_dict(),
            "agent": {
                "iterations": state.total,
                "escalations": state.escalations,
                "drop_backs": state.drop_backs,
                "micro_tasks": [t.to_dict() for t in state.tasks],
                "progress": f"{self.run_rel}/agent/progress.json",
                "learnings": f"{self.run_rel}/agent/learnings.md",
            },
            "sections": sections(c, state, self.plan, self.run_rel, p.data["pauses"], self.distilled(state)),
        }
        if c.type == cert.EXACT:
            return ExecResult(status="completed", checks=checks, extra=extra)
        res = ExecResult(
            status="failed",
            checks=checks,
            diagnosis=cert.diagnosis(c, self.mp.mp_id, fix=self.fatal_fix),
            extra=extra,
        )
        failing = [(chk, step) for chk, step in self.last_checks if step is None or step.status != StepStatus.COMPLETED]
        if failing:
            res.error_output, res.error_output_ref = error_output(self.ctx, failing[0][0])
        elif c.type == cert.BLOCKED and state.task and state.task.records:
            rec = state.task.records[-1]
            path = self.run_dir / rec["evidence"] / "stderr.txt"
            res.error_output, _ = read_capped(path, 16 * 1024)
            res.error_output_ref = f"{rec['evidence']}/stderr.txt" if res.error_output else None
        return res

    def distilled(self, state: LoopState) -> list[str]:
        out = []
        for t in state.tasks:
            path = candidate_path(self.ws.system_dir, self.ctx.run.run_id, t.mt_id)
            if path.exists():
                out.append(self.ws.rel(path))
        return out


def _tail(path: Path, cap: int) -> str:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return ""
    with open(path, "rb") as f:
        if size > cap:
            f.seek(size - cap)
        return f.read().decode("utf-8", errors="replace")


def _rotate(*paths: Path) -> None:
    """Keep an earlier attempt's output beside the new one (run_process appends)."""
    for p in paths:
        if p.exists():
            n = 1
            while (target := p.with_name(f"{p.stem}.attempt{n}{p.suffix}")).exists():
                n += 1
            os.replace(p, target)
