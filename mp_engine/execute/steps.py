"""Steps: run one block of an MP (command, file or check) into the run archive.

Each block is a ledger step. Before it starts, the ledger marks it in progress; when it
ends, its output artifact is written atomically and then the ledger marks it completed or
failed. A step that the ledger already records as finished is never run again: its report
is rebuilt from the artifact on disk. That is all crash recovery needs.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import mp_engine.execute.diagnosis as diag
from mp_engine.config.load import Config
from mp_engine.core.atomic import atomic_write
from mp_engine.core.clock import parse_iso
from mp_engine.core.errors import ConfinementError, ProcessError
from mp_engine.core.events import EventLog
from mp_engine.core.pids import proc_stat
from mp_engine.core.workspace import Workspace
from mp_engine.execute import goal
from mp_engine.execute.errtrap import TRAP_SUFFIX, bash_argv, read_failed_at
from mp_engine.execute.process import run_process, scrub_env
from mp_engine.execute.sandbox import Sandbox, confined
from mp_engine.inbox.mpfile import Block, MicroProject
from mp_engine.record.archive import RunArchive
from mp_engine.record.diagnosis import Diagnosis
from mp_engine.record.ledger import Ledger, LedgerStep, StepStatus, idempotency_key, read_artifact, write_artifact
from mp_engine.record.outcome import StepReport, read_capped

# Where an MP's time budget comes from: its own header, or the executor's default.
BUDGET_SOURCES = {
    "Timeout": "the MP's `Timeout:`",
    "mp_timeout": "`[execution] mp_timeout`",
    "wall_budget": "`[agent] wall_budget`",
}


class TimeBudget:
    """The MP's time budget, charged with the duration of every step that ran."""

    def __init__(self, total: float, source: str, used: float = 0.0):
        self.total = total
        self.source = source  # a key of BUDGET_SOURCES
        self.used = used
        self._lock = threading.Lock()  # parallel agent tasks charge it from their threads

    @classmethod
    def of(cls, mp: MicroProject, default: tuple[float, str], used: float = 0.0) -> TimeBudget:
        """The one rule: the MP's `Timeout:` header, else the executor's `default` (seconds,
        source), less what the run's finished steps already `used`."""
        if "Timeout" in mp.headers:
            return cls(float(mp.headers["Timeout"]), "Timeout", used)
        return cls(*default, used)

    @property
    def describe(self) -> str:
        return BUDGET_SOURCES.get(self.source, self.source)

    def remaining(self) -> float:
        return self.total - self.used

    def charge(self, seconds: float) -> None:
        with self._lock:
            self.used += seconds

    def shared(self) -> TimeBudget:
        """A view of this budget that reads it and charges nothing: for work that runs
        beside other work (parallel agent tasks), whose owner charges the wall time."""
        return _SharedView(self)


class _SharedView(TimeBudget):
    def __init__(self, of: TimeBudget):
        super().__init__(of.total, of.source)
        self._of = of

    def remaining(self) -> float:
        return self._of.remaining()

    def charge(self, seconds: float) -> None:
        pass


def wall_used(steps: Iterable[LedgerStep]) -> float:
    """Seconds during which at least one of `steps` ran: the union of their intervals, as
    the ledger recorded them (the wall time of steps that ran at the same time)."""
    spans = sorted(
        (parse_iso(s.started_at), parse_iso(s.completed_at))
        for s in steps
        if s.started_at and s.completed_at and s.status in (StepStatus.COMPLETED, StepStatus.FAILED)
    )
    total, end = 0.0, None
    for start, stop in spans:
        if end is None or start > end:
            total += (stop - start).total_seconds()
            end = stop
        elif stop > end:
            total += (stop - end).total_seconds()
            end = stop
    return total


@dataclass
class StepContext:
    """What running a block needs; one per run."""

    ws: Workspace
    config: Config
    run: RunArchive
    ledger: Ledger
    mp: MicroProject
    events: EventLog
    stop: threading.Event  # finish the current step, then stop
    stop_now: threading.Event  # stop the current step now
    budget: TimeBudget
    cancelled: threading.Event = field(default_factory=threading.Event)  # set with stop_now by a cancel
    sandbox: Sandbox | None = None  # an agent MP's checks: run inside it (sandbox.py)

    @property
    def step_timeout(self) -> float:
        return float(self.mp.headers.get("Step-Timeout", self.config.execution.step_timeout))


@dataclass
class BlockRun:
    report: StepReport
    ok: bool
    diagnosis: Diagnosis | None = None
    interrupted: bool = False  # stopped by shutdown before or while running; resumable
    cancelled: bool = False  # stopped or never started because the MP was cancelled


def block_key(mp: MicroProject, block: Block) -> str:
    return idempotency_key(mp.sha256, block.step_id, block.kind, block.path or "", block.body)


def _paths(ctx: StepContext, block: Block) -> tuple[Path, Path]:
    d = ctx.run.steps_dir
    return d / f"{block.step_id}.stdout", d / f"{block.step_id}.stderr"


def report_for(ctx: StepContext, block: Block, step: LedgerStep | None) -> StepReport:
    """The report of a block, built from what is on disk (never from memory)."""
    report = StepReport(step_id=block.step_id, kind=block.kind, what=block.what, line=block.line)
    if step is None:
        return report
    report.attempts = step.attempts
    if step.interrupted:
        report.note = "interrupted by an engine stop or crash; run again on recovery"
    artifact = (
        read_artifact(ctx.run.steps_dir, step) if step.status in (StepStatus.COMPLETED, StepStatus.FAILED) else None
    )
    if artifact is None:
        return report
    report.status = "ok" if artifact.get("ok") else ("cancelled" if artifact.get("cancelled") else "failed")
    report.exit_code = artifact.get("exit_code")
    report.duration = artifact.get("duration")
    if artifact.get("message"):
        report.note = artifact["message"]
    cap = ctx.config.execution.output_cap_bytes
    out_path, err_path = _paths(ctx, block)
    for name, path in (("stdout", out_path), ("stderr", err_path)):
        text, omitted = read_capped(path, cap)
        setattr(report, name, text)
        if path.exists():
            setattr(report, f"{name}_ref", f"steps/{path.name}")
    return report


def error_output(ctx: StepContext, block: Block, cap: int = 1024 * 1024) -> tuple[str, str | None]:
    """The failed block's whole error output (both streams), capped at `cap` bytes."""
    out_path, err_path = _paths(ctx, block)
    err, _ = read_capped(err_path, cap)
    out, _ = read_capped(out_path, cap)
    if err and out:
        return f"--- stderr ---\n{err.rstrip()}\n--- stdout ---\n{out.rstrip()}\n", f"steps/{err_path.name}"
    if err:
        return err, f"steps/{err_path.name}"
    return out, (f"steps/{out_path.name}" if out else None)


def run_block(ctx: StepContext, block: Block) -> BlockRun:
    """Run `block` unless the ledger says it already finished; record everything."""
    step = ctx.ledger.ensure_step(block.step_id, block.kind, block_key(ctx.mp, block))
    if step.status in (StepStatus.COMPLETED, StepStatus.FAILED):
        artifact = read_artifact(ctx.run.steps_dir, step) or {}
        d = Diagnosis.from_dict(artifact["diagnosis"]) if artifact.get("diagnosis") else None
        return BlockRun(report_for(ctx, block, step), ok=step.status is StepStatus.COMPLETED, diagnosis=d)
    if ctx.cancelled.is_set():
        return BlockRun(report_for(ctx, block, step), ok=False, cancelled=True)
    if ctx.stop.is_set() or ctx.stop_now.is_set():
        return BlockRun(report_for(ctx, block, step), ok=False, interrupted=True)
    label = "check" if block.kind == "check" else "step"
    if step.interrupted and ctx.config.recovery.interrupted_step == "report":
        d = diag.interrupted(block.step_id, label, block.index, ctx.mp.mp_id)
        return _record_failure(ctx, block, step, d, message="not re-run: [recovery] interrupted_step = report")
    if ctx.budget.remaining() <= 0:
        d = diag.mp_timeout_before(block.step_id, label, block.index, ctx.budget.total, ctx.mp.mp_id)
        return _record_failure(ctx, block, step, d, message="MP time budget exhausted")

    ctx.ledger.start(step)
    ctx.events.emit(
        "step_started", mp=ctx.mp.mp_id, run=ctx.run.run_id, step=block.step_id, kind=block.kind, attempt=step.attempts
    )
    if block.kind == "file":
        result = _write_file(ctx, block, step)
    else:
        result = _run_command(ctx, block, step, label)
    if not result.interrupted:
        ctx.events.emit(
            "step_finished",
            mp=ctx.mp.mp_id,
            run=ctx.run.run_id,
            step=block.step_id,
            ok=result.ok,
            exit_code=result.report.exit_code,
            duration=result.report.duration,
            error_kind=result.diagnosis.kind if result.diagnosis else None,
        )
    return result


def _record_failure(ctx: StepContext, block: Block, step: LedgerStep, d: Diagnosis, *, message: str) -> BlockRun:
    """Fail a step that never ran (or whose run is refused), with an artifact."""
    if step.status is not StepStatus.IN_PROGRESS:
        ctx.ledger.start(step)
    ref = write_artifact(
        ctx.run.steps_dir,
        step,
        {"ok": False, "exit_code": None, "duration": 0.0, "message": message, "diagnosis": d.to_dict()},
        durable=ctx.ledger.durable,
    )
    ctx.ledger.finish(step, ok=False, output_ref=ref, error=d.summary)
    return BlockRun(report_for(ctx, block, step), ok=False, diagnosis=d)


def _write_file(ctx: StepContext, block: Block, step: LedgerStep) -> BlockRun:
    started = time.monotonic()
    assert block.path is not None
    data = block.body.encode("utf-8")
    try:
        target = ctx.ws.write_confined(block.path, data)  # every component without following links
    except ConfinementError as e:
        d = diag.file_refused(block.step_id, block.index, block.line, block.path, str(e), ctx.mp.mp_id)
        return _record_failure(ctx, block, step, d, message=f"refused: {e}")
    except OSError as e:
        d = diag.file_write_failed(
            block.step_id, block.index, block.line, block.path, getattr(e, "strerror", None) or str(e), ctx.mp.mp_id
        )
        return _record_failure(ctx, block, step, d, message=f"write failed: {e}")
    duration = round(time.monotonic() - started, 3)
    message = f"wrote {len(data)} bytes to {ctx.ws.rel(target)} (sha256 {hashlib.sha256(data).hexdigest()[:16]})"
    ref = write_artifact(
        ctx.run.steps_dir,
        step,
        {"ok": True, "exit_code": None, "duration": duration, "message": message, "path": ctx.ws.rel(target)},
        durable=ctx.ledger.durable,
    )
    ctx.ledger.finish(step, ok=True, output_ref=ref)
    ctx.budget.charge(duration)
    return BlockRun(report_for(ctx, block, step), ok=True)


def _rotate_outputs(paths: tuple[Path, Path], attempt: int) -> None:
    """Keep the partial output of an interrupted attempt beside the new one."""
    for p in paths:
        if p.exists() and attempt > 1:
            os.replace(p, p.with_name(f"{p.stem}.attempt{attempt - 1}{p.suffix}"))


def _write_script(path: Path, text: str) -> None:
    """The script a command block runs, kept in the run archive. Written again only when
    its text differs (a retry, or a check run by every agent iteration, reuses it); not
    fsynced, since every attempt rewrites a script it cannot read back whole."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    atomic_write(path, text, durable=False)


def _run_command(ctx: StepContext, block: Block, step: LedgerStep, label: str) -> BlockRun:
    """Run one command block as a ledger step: started, its process, its verdict, finished.
    Long because it is one step's whole life in order, each stage a few lines that read the
    ones before; split, the order that makes it crash-safe would be spread over helpers."""
    out_path, err_path = _paths(ctx, block)
    _rotate_outputs((out_path, err_path), step.attempts)
    script = ctx.run.steps_dir / f"{block.script_name}.{block.lang}"
    trap_file = ctx.run.steps_dir / f"{block.step_id}{TRAP_SUFFIX}"
    trap_file.unlink(missing_ok=True)  # a record of an earlier attempt says nothing of this one
    _write_script(script, block.body + "\n")
    if block.lang == "sh":
        argv = ["/bin/sh", "-e", str(script)]
    elif block.lang == "py":  # ```python: run by python3 (unbuffered), like any step
        argv = ["python3", "-u", str(script)]
    else:  # bash: with the ERR trap that records the failing command (errtrap.py)
        argv = bash_argv(ctx.config.execution.shell, script, trap_file)
    remaining = ctx.budget.remaining()
    timeout, source = ctx.step_timeout, "Step-Timeout"
    if remaining < timeout:
        timeout, source = remaining, "Timeout"
    env = scrub_env(
        ctx.config.execution.env_allow,
        extra={
            "MP_ID": ctx.mp.mp_id,
            "MP_STEP": block.step_id,
            "MP_WORKSPACE": str(ctx.ws.root),
            "MP_RUN_DIR": str(ctx.run.dir),
        },
    )

    def spawned(pid: int) -> None:
        info = proc_stat(pid)
        ctx.ledger.spawned(step, pid, info[1] if info else None)

    try:
        with confined(ctx.sandbox, argv) as argv:
            res = run_process(
                argv,
                cwd=ctx.ws.root,
                env=env,
                timeout=timeout,
                stdout_path=out_path,
                stderr_path=err_path,
                stop_now=ctx.stop_now,
                kill_grace=ctx.config.execution.kill_grace,
                on_spawn=spawned,
                markers=(f"MP_RUN_DIR={ctx.run.dir}", f"MP_STEP={block.step_id}"),
            )
    except ProcessError as e:
        failed = diag.start_failed(block.step_id, label, block.index, block.line, str(e), ctx.mp.mp_id)
        return _record_failure(ctx, block, step, failed, message=str(e))
    ctx.budget.charge(res.duration)
    if res.interrupted and ctx.cancelled.is_set():  # cancelled while it ran: it ends here, with its output
        ref = write_artifact(
            ctx.run.steps_dir,
            step,
            {
                "ok": False,
                "cancelled": True,
                "exit_code": res.exit_code,
                "signal": res.signal,
                "duration": res.duration,
            },
            durable=ctx.ledger.durable,
        )
        ctx.ledger.finish(step, ok=False, output_ref=ref, error="cancelled")
        return BlockRun(report_for(ctx, block, step), ok=False, cancelled=True)
    if res.interrupted:
        # Left in progress on purpose: recovery decides (rerun or report) on restart.
        return BlockRun(report_for(ctx, block, step), ok=False, interrupted=True)
    d: Diagnosis | None = None
    if not res.ok:
        err_text, _ = read_capped(err_path, 64 * 1024)
        out_text, _ = read_capped(out_path, 16 * 1024)
        d = diag.classify_process(
            diag.Failure(
                label=label,
                number=block.index,
                step_id=block.step_id,
                line=block.line,
                command=block.body,
                exit_code=res.exit_code,
                signal=res.signal,
                timed_out=res.timed_out,
                timeout=timeout,
                timeout_source=source,
                stderr=err_text,
                stdout=out_text,
                mp_id=ctx.mp.mp_id,
                failed_at=read_failed_at(trap_file, res.exit_code, block.body) if block.lang == "bash" else None,
            )
        )
    ok, d, measured = goal.judge(block, res.ok, out_path, d, ctx.mp.mp_id)  # a metric check: its target too
    ref = write_artifact(
        ctx.run.steps_dir,
        step,
        {
            "ok": ok,
            "exit_code": res.exit_code,
            "signal": res.signal,
            "duration": res.duration,
            "timed_out": res.timed_out,
            "timeout": timeout,
            "diagnosis": d.to_dict() if d else None,
            **measured,
        },
        durable=ctx.ledger.durable,
    )
    ctx.ledger.finish(step, ok=ok, output_ref=ref, error=d.summary if d else None)
    return BlockRun(report_for(ctx, block, step), ok=ok, diagnosis=d)
