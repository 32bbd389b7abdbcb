"""Calling an agent: spawn a level's CLI in one workspace (retrying transient outages),
classify how it ended, and read what it said. A call that cannot work (auth, not found,
an outage that outlasted its retries) is said by `why_fatal`; the run decides the rest.

One `Caller` per workspace: a task's worktree (its own caller for each task that runs at
once). The limiter and the budget are the run's, shared by every caller.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mp_engine.agent.call import echo, structured
from mp_engine.agent.call.chain import render_argv
from mp_engine.agent.call.classify import classify
from mp_engine.agent.call.endpoints import Reach, reach
from mp_engine.agent.call.invoke import Call, CallKind, argv_problem, run_agent
from mp_engine.agent.call.network import Network, gives_up
from mp_engine.agent.evidence import IterationEvidence
from mp_engine.agent.scope import RunScope
from mp_engine.config.agent import AgentLevel
from mp_engine.core.atomic import atomic_write, atomic_write_json, read_tail
from mp_engine.core.workspace import NOT_WORK
from mp_engine.execute import sandbox
from mp_engine.execute.process import scrub_env
from mp_engine.record.outcome import read_capped

OUTPUT_READ_CAP = 1024 * 1024


@dataclass(frozen=True)
class CallSite:
    """What one call is: its level, its evidence (the prompt in it), whose iteration it is, and
    what to do once its process exists (record its group for recovery)."""

    level: AgentLevel
    ev: IterationEvidence
    mt_id: str
    iteration: int
    level_index: int
    on_spawn: Callable[[int], None]


class Caller:
    def __init__(self, run: RunScope, workdir: Path, *, read_only: bool = False):
        """Calls in `workdir`, for the run `run` (its policy, limiter, budget, stops and
        events); `read_only`: every call sandboxed with the workdir read-only ([diagnose])."""
        self.run = run
        self.cfg = run.cfg
        self.read_only = read_only
        # What the sandbox hides but the worktree: the workspace (a read-only call sees it,
        # and never the engine's own files).
        self.engine_root = run.ws.local_dir if read_only else run.ws.root
        self.mp_id = run.mp.mp_id
        self.run_dir = run.run_dir
        self.workdir = workdir
        self.limiter = run.limiter
        self.budget = run.budget
        self.stop = run.ctx.stop
        self.stop_now = run.ctx.stop_now
        self.kill_grace = run.ctx.config.execution.kill_grace

    def call(
        self,
        level: AgentLevel,
        ev: IterationEvidence,
        *,
        key: str,
        mt_id: str,
        iteration: int,
        level_index: int,
        on_spawn: Callable[[int], None],
    ) -> Call:
        """Call the agent with the prompt in `ev` (retrying transient outages), unless this
        step's call (`key`: its idempotency key) already finished before a crash: then its
        recorded outcome is used."""
        call_file = ev.path("call.json")
        spending = self.run.spending
        charge_key = f"{self.run.run_id}/{key}"
        try:
            done = json.loads(call_file.read_text(encoding="utf-8"))
            if done.get("idempotency_key") == key:
                recorded = Call.from_dict(done["call"])
                if spending is not None:  # a crash may have come before its charge: counted once
                    spending.charge(charge_key, recorded, level)
                return recorded
        except (FileNotFoundError, ValueError):
            pass
        site = CallSite(level, ev, mt_id, iteration, level_index, on_spawn)
        argv, env = self._command(site)
        too_long = argv_problem(argv, env)
        if too_long is not None:  # a configuration error, not "not installed" (issue #16)
            return Call(CallKind.CONFIG, detail=f"the prompt does not fit on the command line: {too_long}")
        refused = spending.refusal(level, ev.path("prompt.md").read_text(encoding="utf-8")) if spending else None
        if refused is not None:  # an engine budget is spent (issue #42): the call is not made
            return refused
        call = self._with_retries(site, argv, env)
        if spending is not None:
            spending.price(call, level)
        if not call.pauses:
            atomic_write_json(call_file, {"idempotency_key": key, "call": call.to_dict()}, durable=False)
        if spending is not None:  # after its record: a crash between the two charges it on replay
            spending.charge(charge_key if not call.pauses else f"{charge_key}#{time.time()!r}", call, level)
        return call

    def _command(self, site: CallSite) -> tuple[list[str], dict[str, str]]:
        """The level's argv with the call's values, and the scrubbed environment it runs with."""
        prompt_file = site.ev.path("prompt.md")
        values = {
            "prompt": prompt_file.read_text(encoding="utf-8"),
            "prompt_file": str(prompt_file),
            "workspace": str(self.workdir),
            "mt_id": site.mt_id,
            "evidence_dir": str(site.ev.dir),
            "ignore_file": str(self.ignore_file()),
        }
        env = scrub_env(
            site.level.env_allow,
            extra={
                "MP_ID": self.mp_id,
                "MP_MT": site.mt_id,
                "MP_ITERATION": str(site.iteration),
                "MP_LEVEL": str(site.level_index),
                "MP_WORKSPACE": str(self.workdir),
                "MP_RUN_DIR": str(self.run_dir),
                "MP_PROMPT_FILE": str(prompt_file),
            },
        )
        return render_argv(site.level, values), env

    def _with_retries(self, site: CallSite, argv: list[str], env: dict[str, str]) -> Call:
        """The call, in the sandbox when it is on; a transient outage is retried with backoff."""
        found = reach(site.level, env, self.workdir)  # where the CLI is configured to connect
        box = sandbox.for_call(
            self.cfg,
            site.level,
            workdir=self.workdir,
            engine_root=self.engine_root,
            evidence_dir=site.ev.dir,
            readable=[self.ignore_file()],
            read_only=self.read_only,
            endpoints=found.allowed(),
            protected=found.protected,
        )
        if box is not None:  # the evidence says the call was sandboxed, and how
            said = {e.host: e.source for e in found.endpoints if e.trusted}
            atomic_write_json(site.ev.path("sandbox.json"), {**box.record(), "endpoints": said}, durable=False)
        retries = 0
        while True:
            call = self._once(site, box, found, argv, env)
            if call.kind is not CallKind.TRANSIENT or retries >= self.cfg.transient_retries:
                return call
            delay = self.cfg.transient_backoff * (2**retries)
            retries += 1
            self.run.ctx.events.emit(
                "agent_call_retry",
                mp=self.mp_id,
                mt=site.mt_id,
                iteration=site.iteration,
                level=site.level_index,
                detail=call.detail,
                retry=retries,
                delay=delay,
            )
            if self.stop.wait(delay) or self.stop_now.is_set():
                return Call(CallKind.INTERRUPTED, detail="stopped while waiting to retry")

    def _once(
        self, site: CallSite, box: sandbox.Sandbox | None, found: Reach, argv: list[str], env: dict[str, str]
    ) -> Call:
        ev, level = site.ev, site.level
        _rotate(ev.path("stdout.txt"), ev.path("stderr.txt"))
        self.limiter.record(time.time())
        refused: list[tuple[str, str]] = []  # (host, why): allowed hosts the relay could not reach
        joined: list[str] = []  # the allowed hosts it joined the CLI to
        prompt = ev.path("prompt.md").read_text(encoding="utf-8")

        def net() -> Network | None:
            if box is None:
                return None
            configured = tuple((e.host, e.source) for e in found.endpoints if e.trusted)
            named = tuple((e.host, e.source) for e in found.named())
            return Network(box.allow_hosts, configured, tuple(dict.fromkeys(refused)), named, tuple(set(joined)))

        def heard(host: str, e: OSError | None) -> None:
            if e is None:
                joined.append(host)
            else:
                refused.append((host, str(e)))

        def give_up() -> bool:  # what the sandbox withholds will not come: no retry of the CLI's reaches it
            network = net()
            said = read_tail(ev.path("stdout.txt"), 16384) + "\n" + read_tail(ev.path("stderr.txt"), 16384)
            return network is not None and gives_up(echo.for_limits(said, prompt), network)

        with sandbox.confined(box, argv, heard) as run_argv:
            res = run_agent(
                run_argv,
                cwd=self.workdir,
                env=env,
                timeout=max(0.1, min(level.timeout, self.budget.remaining())),
                idle_timeout=level.idle_timeout,
                stdout_path=ev.path("stdout.txt"),
                stderr_path=ev.path("stderr.txt"),
                stdin_path=ev.path("prompt.md") if level.stdin else None,
                stop_now=self.stop_now,
                kill_grace=self.kill_grace,
                on_spawn=site.on_spawn,
                markers=(f"MP_RUN_DIR={self.run_dir}", f"MP_MT={site.mt_id}", f"MP_ITERATION={site.iteration}"),
                give_up=give_up if box is not None else None,
            )
        return self._classify(res, ev, prompt, level, net())

    def _classify(
        self, res: Any, ev: IterationEvidence, prompt: str, level: AgentLevel, network: Network | None = None
    ) -> Call:
        out = read_tail(ev.path("stdout.txt"), 256 * 1024)
        err = read_tail(ev.path("stderr.txt"), 256 * 1024)
        shaped = structured.parse(out)  # claude's or codex's JSON output: fields, not patterns
        said = (shaped.answer if shaped else out) + "\n" + err
        # Limits are read from the CLI's own error (never the agent's answer, never the
        # echoed prompt: issue #16); without structured output, from all it printed.
        cli_said = (shaped.error if shaped else out) + "\n" + err
        call = classify(
            res,
            echo.for_limits(cli_said, prompt),
            status_seen="---LOOPR_STATUS---" in echo.for_claims(said, prompt),
            now=datetime.now(UTC),
            fallback_wait=self.cfg.usage_limit_wait,
            rate_wait=self.cfg.rate_limit_wait,
            api_status=shaped.api_status if shaped and shaped.is_error else None,
            resets_at=shaped.resets_at if shaped else None,
            turns=shaped.turns if shaped else None,
            max_turns=level.max_turns,
            turn_limit=bool(shaped and shaped.turn_limit),
            network=network,
        )
        # What it cost, as the CLI reported it: its fields, or aider's token lines (issue #32).
        call.usage = shaped.usage if shaped and shaped.usage else structured.text_usage(out + "\n" + err)
        call.environment = shaped.environment if shaped else None
        return call

    def ignore_file(self) -> Path:
        """`{ignore_file}`: what is not the agent's work, as gitignore patterns anchored at the
        workspace root (aider's `--aiderignore` keeps it from reading or editing them)."""
        path = self.run_dir / "agent" / "not-work.ignore"
        if not path.exists():
            atomic_write(path, "".join(f"/{p}\n" for p in NOT_WORK).encode(), durable=False)
        return path

    @staticmethod
    def read_output(ev: IterationEvidence) -> str:
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


def why_fatal(call: Call, level: AgentLevel, who: str, section: str, mp_id: str, retries: int) -> tuple[str, str, str]:
    """(reason, detail, fix) of a call that ends the run (`Call.ends_run`): `who` names the
    worker's level in its chain, or a planner or reflector; `section` its table."""
    cmd = level.argv[0] if level.argv else level.name
    resend = f"then send the MP again with `Approves: {mp_id}`"
    return {
        "not_found": (
            "agent_not_found",
            f"The agent CLI of {who} could not run: {call.detail}.",
            f"Install `{cmd}` on the engine host (on the daemon's PATH) or correct the argv of level "
            f"{level.name!r} in `{section}`, {resend}.",
        ),
        "auth": (
            "agent_auth",
            f"The agent CLI of {who} is not authenticated: {call.detail}.",
            f"Log `{cmd}` in as the engine's user (or pass its API key variable through the level's "
            f"`env_allow`), {resend}.",
        ),
        "billing": (
            "agent_billing",
            f"The account of {who} has no credit left: {call.detail}.",
            f"Add credits to the provider account that `{cmd}` uses (or give level {level.name!r} another "
            f"account's key through `env_allow`), {resend}.",
        ),
        "config": (
            "agent_config",
            f"The agent CLI of {who} cannot be started this way: {call.detail}.",
            f"Pass the prompt on stdin (`stdin = true` in level {level.name!r}, without {{prompt}} in its argv) or "
            f"as a file (`{{prompt_file}}`), {resend}.",
        ),
        "fleet": (
            "fleet_failed",
            f"The fleet could not run the attempt of {who}: {call.detail}.",
            f"Read the attempt's failure in Temporal (`temporal workflow show --workflow-id <id>`, docs/FLEET.md) "
            f"and the worker's log, repair the worker, {resend}.",
        ),
        "unreachable": (
            "agent_unreachable",
            f"The sandbox kept the agent CLI of {who} from {call.host or 'the host it is configured to reach'}: "
            f"{call.detail}.",
            f"Add `{call.host or 'HOST:PORT'}` to `sandbox_allow_hosts` of level {level.name!r} in `{section}`"
            + ("" if call.host else f" (the endpoint `{cmd}` is configured with, where the engine does not read it)")
            + f", {resend}.",
        ),
        "transient": (
            "agent_unavailable",
            f"The agent's provider stayed unavailable after {retries} retries: {call.detail}.",
            f"Start `{call.host}`, or correct its URL where it is set (said above), {resend}."
            if call.host  # the endpoint the sandbox allowed, which the engine's host could not reach
            else f"Wait until the provider is back (its status page), {resend}.",
        ),
    }[call.kind]


def _rotate(*paths: Path) -> None:
    """Keep an earlier attempt's output beside the new one (run_process appends)."""
    for p in paths:
        if p.exists():
            n = 1
            while (target := p.with_name(f"{p.stem}.attempt{n}{p.suffix}")).exists():
                n += 1
            os.replace(p, target)
