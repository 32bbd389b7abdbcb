"""The agent call of one iteration: spawn the level's CLI (retrying transient outages),
classify how it ended, and record a call that cannot work (auth, not found, outage)."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

from mp_engine.agent import certificate as cert
from mp_engine.agent import echo, structured
from mp_engine.agent.chain import describe, render_argv
from mp_engine.agent.evidence import IterationEvidence
from mp_engine.agent.invoke import Call, argv_problem, classify, run_agent
from mp_engine.agent.loopstate import LoopState
from mp_engine.atomic import atomic_write, atomic_write_json, read_tail
from mp_engine.config import AgentLevel
from mp_engine.execute.process import scrub_env
from mp_engine.pids import proc_stat
from mp_engine.record.ledger import LedgerStep, write_artifact
from mp_engine.record.outcome import read_capped
from mp_engine.workspace import NOT_WORK

OUTPUT_READ_CAP = 1024 * 1024


class CallMixin:
    """Part of `AgentRun` (loop.py): uses its ctx, cfg, levels, mp, ws, run_dir, limiter, budget."""

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
            "workspace": str(self.work_root),
            "mt_id": mt_id,
            "evidence_dir": str(ev.dir),
            "ignore_file": str(self.ignore_file()),
        }
        argv = render_argv(level, values)
        env = scrub_env(
            level.env_allow,
            extra={
                "MP_ID": self.mp.mp_id,
                "MP_MT": mt_id,
                "MP_ITERATION": str(iteration),
                "MP_LEVEL": str(state.level),
                "MP_WORKSPACE": str(self.work_root),
                "MP_RUN_DIR": str(self.run_dir),
                "MP_PROMPT_FILE": str(prompt_file),
            },
        )

        too_long = argv_problem(argv, env)
        if too_long is not None:  # a configuration error, not "not installed" (issue #16)
            return Call("config", detail=f"the prompt does not fit on the command line: {too_long}")

        def spawned(pid: int) -> None:
            info = proc_stat(pid)
            self.ctx.ledger.spawned(step, pid, info[1] if info else None)

        retries = 0
        while True:
            _rotate(ev.path("stdout.txt"), ev.path("stderr.txt"))
            self.limiter.record(time.time())
            res = run_agent(
                argv,
                cwd=self.work_root,
                env=env,
                timeout=max(0.1, min(level.timeout, self.budget.remaining())),
                idle_timeout=level.idle_timeout,
                stdout_path=ev.path("stdout.txt"),
                stderr_path=ev.path("stderr.txt"),
                stdin_path=prompt_file if level.stdin else None,
                stop_now=self.ctx.stop_now,
                kill_grace=self.ctx.config.execution.kill_grace,
                on_spawn=spawned,
                markers=(f"MP_RUN_DIR={self.run_dir}", f"MP_MT={mt_id}", f"MP_ITERATION={iteration}"),
            )
            out = read_tail(ev.path("stdout.txt"), 256 * 1024)
            err = read_tail(ev.path("stderr.txt"), 256 * 1024)
            shaped = structured.parse(out)  # claude's or codex's JSON output: fields, not patterns
            said = (shaped.answer if shaped else out) + "\n" + err
            # Limits are read from the CLI's own error (never the agent's answer, never the
            # echoed prompt: issue #16); without structured output, from all it printed.
            cli_said = (shaped.error if shaped else out) + "\n" + err
            call = classify(
                res,
                echo.for_limits(cli_said, values["prompt"]),
                status_seen="---LOOPR_STATUS---" in echo.for_claims(said, values["prompt"]),
                now=datetime.now(UTC),
                fallback_wait=self.cfg.usage_limit_wait,
                rate_wait=self.cfg.rate_limit_wait,
                api_status=shaped.api_status if shaped and shaped.is_error else None,
                resets_at=shaped.resets_at if shaped else None,
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

    def ignore_file(self) -> Path:
        """`{ignore_file}`: what is not the agent's work, as gitignore patterns anchored at the
        workspace root (aider's `--aiderignore` keeps it from reading or editing them)."""
        path = self.run_dir / "agent" / "not-work.ignore"
        if not path.exists():
            atomic_write(path, "".join(f"/{p}\n" for p in NOT_WORK).encode(), durable=False)
        return path

    def read_output(self, ev: IterationEvidence) -> str:
        """What the agent said (stdout and stderr), without its echo of the prompt."""
        out, _ = read_capped(ev.path("stdout.txt"), OUTPUT_READ_CAP)
        shaped = structured.parse(out)
        out = shaped.answer if shaped else out  # a JSON-escaped status block reads as text
        err, _ = read_capped(ev.path("stderr.txt"), OUTPUT_READ_CAP // 4)
        try:
            prompt = ev.path("prompt.md").read_text(encoding="utf-8")
        except OSError:
            prompt = None
        return echo.for_claims(out + "\n" + err, prompt)

    def fatal(
        self,
        state: LoopState,
        step: LedgerStep,
        ev: IterationEvidence,
        call: Call,
        level: AgentLevel,
        who: str | None = None,
        section: str = "[agent] levels",
    ) -> None:
        """The agent CLI cannot work (not installed, not logged in, provider down); `who`
        names a planner or reflector and `section` its table (default: the current task's
        level in the chain)."""
        task = state.task
        cmd = level.argv[0] if level.argv else level.name
        who = who or describe(state.levels, state.level)
        reason, detail, fix = {
            "not_found": (
                "agent_not_found",
                f"The agent CLI of {who} could not run: {call.detail}.",
                f"Install `{cmd}` on the engine host (on the daemon's PATH) or correct the argv of level "
                f"{level.name!r} in `{section}`, then send the MP again with `Approves: {self.mp.mp_id}`.",
            ),
            "auth": (
                "agent_auth",
                f"The agent CLI of {who} is not authenticated: {call.detail}.",
                f"Log `{cmd}` in as the engine's user (or pass its API key variable through the level's "
                f"`env_allow`), then send the MP again with `Approves: {self.mp.mp_id}`.",
            ),
            "billing": (
                "agent_billing",
                f"The account of {who} has no credit left: {call.detail}.",
                f"Add credits to the provider account that `{cmd}` uses (or give level {level.name!r} another "
                f"account's key through `env_allow`), then send the MP again with `Approves: {self.mp.mp_id}`.",
            ),
            "config": (
                "agent_config",
                f"The agent CLI of {who} cannot be started this way: {call.detail}.",
                f"Pass the prompt on stdin (`stdin = true` in level {level.name!r}, without {{prompt}} in its argv) or "
                f"as a file (`{{prompt_file}}`), then send the MP again with `Approves: {self.mp.mp_id}`.",
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
            "mt": task.mt_id if task else None,
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


def _rotate(*paths: Path) -> None:
    """Keep an earlier attempt's output beside the new one (run_process appends)."""
    for p in paths:
        if p.exists():
            n = 1
            while (target := p.with_name(f"{p.stem}.attempt{n}{p.suffix}")).exists():
                n += 1
            os.replace(p, target)
