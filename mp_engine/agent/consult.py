"""An agent's opinion on a failure (`[diagnose] level`, issue #34): when an MP ends in
ERROR, one agent level is asked for a root cause and one fix, beside the engine's own
diagnosis, never instead of it.

The call only reads: it runs inside the OS sandbox with the workspace read-only (without
bubblewrap on the host it is not made, and the result says why), within `[diagnose]
timeout` (60 s), counted against `[agent] calls_per_hour`. Its prompt carries the MP, the
engine's diagnosis and the end of the failing output; its answer is read only from a
block under a fresh nonce. The result shows it in a section of its own, marked as the
agent's suggestion that nothing verified; the call's evidence is in the run's
`agent/DIAGNOSE/iter-001/`. Off by default.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from mp_engine.agent.call.caller import Caller
from mp_engine.agent.call.limiter import CallLimiter
from mp_engine.agent.evidence import IterationEvidence
from mp_engine.agent.judge.claims import last_block
from mp_engine.agent.run.steps import AgentSteps
from mp_engine.agent.scope import RunScope
from mp_engine.execute import sandbox
from mp_engine.execute.steps import StepContext, TimeBudget
from mp_engine.inbox.mpfile import MicroProject
from mp_engine.record.diagnosis import Diagnosis
from mp_engine.record.outcome import fenced

MT = "DIAGNOSE"
BLOCK_RE = re.compile(r"<diagnosis\b([^>]*)>(.*?)</diagnosis\s*>", re.S | re.I)
FIELD_RE = re.compile(r"^\s*(ROOT CAUSE|FIX)\s*:\s*(.+?)\s*(?=^\s*(?:ROOT CAUSE|FIX)\s*:|\Z)", re.S | re.M | re.I)
MP_CHARS, OUTPUT_CHARS = 8000, 6000


@dataclass(frozen=True)
class Suggestion:
    level: str
    root_cause: str = ""
    fix: str = ""
    said: str = ""  # why there is no suggestion, when there is none
    evidence: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in ("", None)}

    def section(self) -> dict[str, str]:
        """The result's section: the agent's words, marked as such."""
        head = f"Asked `[diagnose] level = {self.level}` (read-only, in the sandbox); not verified by the engine."
        if not self.root_cause:
            return {"title": "Agent's suggestion (not verified)", "body": f"{head}\n\nNo suggestion: {self.said}"}
        body = [head, "", f"- Root cause: {self.root_cause}", f"- Fix: {self.fix or '(none given)'}"]
        body += [f"- Evidence: `{self.evidence}`"] if self.evidence else []
        return {"title": "Agent's suggestion (not verified)", "body": "\n".join(body)}


def prompt(mp: MicroProject, d: Diagnosis, error_output: str, nonce: str) -> str:
    text = mp.text if len(mp.text) <= MP_CHARS else mp.text[:MP_CHARS] + "\n[... cut]"
    tail = error_output[-OUTPUT_CHARS:]
    return "\n".join(
        [
            f"# Diagnosis for mp-engine: {mp.mp_id} failed",
            "",
            "You review; you change nothing (the repository is read-only to you). Read what you need, then",
            "say the root cause of the failure below and exactly one fix a person can apply.",
            "",
            "## The MP",
            fenced(text, "markdown"),
            "",
            "## What the engine found",
            "",
            f"- Kind: {d.kind}",
            f"- Where: {d.step_id or '-'}" + (f", line {d.line}" if d.line else ""),
            f"- Diagnosis: {d.diagnosis}",
            f"- The engine's fix: {d.fix}",
            "",
            "## The end of the failing output",
            fenced(tail or "(no output)"),
            "",
            "## Your answer (required; nothing else is read)",
            "",
            f'<diagnosis nonce="{nonce}">',
            "ROOT CAUSE: one or two sentences",
            "FIX: exactly one fix, concrete (a file and what to change, or a command)",
            "</diagnosis>",
            "",
            "Blocks without this exact nonce are ignored.",
            "",
        ]
    )


def parse(answer: str, nonce: str) -> tuple[str, str] | None:
    """(root cause, fix) from the last block under `nonce`, or None."""
    block = last_block(answer, BLOCK_RE, nonce)
    if block is None:
        return None
    fields = {k.upper(): " ".join(v.split())[:1000] for k, v in FIELD_RE.findall(block)}
    return (fields["ROOT CAUSE"], fields.get("FIX", "")) if fields.get("ROOT CAUSE") else None


def consult(ctx: StepContext, d: Diagnosis, error_output: str) -> Suggestion | None:
    """Ask `[diagnose] level` about failure `d` of the run `ctx` is about; None when
    `[diagnose]` is off."""
    ws, config, run_dir, mp = ctx.ws, ctx.config, ctx.run.dir, ctx.mp
    name = config.diagnose.level
    if not name:
        return None
    if (why := sandbox.problem()) is not None:
        return Suggestion(name, said=f"the call would not be read-only without the OS sandbox: {why}")
    level = next(lv for lv in config.agent.levels if lv.name == name)
    limit = config.diagnose.timeout
    level = level.model_copy(
        update={"timeout": min(level.timeout, limit), "idle_timeout": min(level.idle_timeout, limit)}
    )
    limiter = CallLimiter(ws.local_dir / "agent_calls.log", config.agent.calls_per_hour)
    if limiter.next_slot(time.time()) is not None:
        return Suggestion(
            name, said=f"{config.agent.calls_per_hour} agent calls in the last hour ([agent] calls_per_hour)"
        )
    ev = IterationEvidence(run_dir, MT, 1)
    nonce = secrets.token_hex(8)
    ev.write("prompt.md", prompt(mp, d, error_output, nonce))
    # The workspace read-only, the engine's own files (lock, event log, tokens) hidden in it.
    alone = replace(ctx, stop=threading.Event(), stop_now=threading.Event(), budget=TimeBudget(limit, "Timeout"))
    scope = RunScope(
        alone,
        config.agent,
        nonce,
        AgentSteps(ctx.ledger, ctx.run.steps_dir),
        limiter,
        run_dir / "agent" / "learnings.md",
    )
    caller = Caller(scope, ws.root, read_only=True)
    call = caller.call(level, ev, key=nonce, mt_id=MT, iteration=1, level_index=0, on_spawn=lambda pid: None)
    ev.add(ev.path("stdout.txt"))
    ev.add(ev.path("stderr.txt"))
    ev.write_manifest()
    rel = f"{ev.rel}/"
    found = parse(caller.read_output(ev), nonce) if call.kind == "ok" else None
    if found is None:
        why = (
            f"the call ended `{call.kind}`" + (f" ({call.detail})" if call.detail else "")
            if call.kind != "ok"
            else ("its answer had no <diagnosis> block with ROOT CAUSE under this call's nonce")
        )
        return Suggestion(name, said=why, evidence=rel)
    return Suggestion(name, root_cause=found[0], fix=found[1], evidence=rel)
