"""The verdict (issue #43, "Judged honestly"): the agent's work, taken from its work branch as
a patch, applied to a fresh copy of the repository at the base commit that the agent never
saw; the files of the judging tests put back as the base has them (what the agent wrote there
cannot help it), the test patch applied, and the tests run. Resolved when every FAIL_TO_PASS
test passes and every PASS_TO_PASS test still does. The agent's claims play no part.

The same judgement with no patch at all is the environment's **probe**, made before any agent
runs: setup must work, the test patch must apply, the FAIL_TO_PASS tests must fail and the
PASS_TO_PASS tests pass. A task whose probe fails is `env_error` for every configuration,
never the agent's failure.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mp_engine.eval.checkout import CheckoutError, apply, fresh_copy, patch_paths, restore
from mp_engine.eval.results import Verdict
from mp_engine.eval.tasks import Task
from mp_engine.eval.testcmd import Shell, outcomes


@dataclass
class Judgement:
    verdict: Verdict
    why: str = ""
    fail_to_pass: dict[str, bool] = field(default_factory=dict)
    pass_to_pass: dict[str, bool] = field(default_factory=dict)
    duration: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "why": self.why,
            "fail_to_pass": self.fail_to_pass,
            "pass_to_pass": self.pass_to_pass,
            "duration": round(self.duration, 3),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Judgement:
        return cls(
            Verdict(data["verdict"]),
            data.get("why", ""),
            dict(data.get("fail_to_pass") or {}),
            dict(data.get("pass_to_pass") or {}),
            float(data.get("duration") or 0.0),
        )


def judge(task: Task, source: Path, base: str, patch: str, copy: Path, shell: Shell) -> Judgement:
    """`patch` on a fresh copy of `source` at `base` (in `copy`), judged by the task's tests.
    The copy is removed afterwards; the commands' output stays in the shell's logs."""
    start = time.monotonic()
    try:
        verdict = _judge(task, source, base, patch, copy, shell)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    verdict.duration = time.monotonic() - start
    return verdict


def _judge(task: Task, source: Path, base: str, patch: str, copy: Path, shell: Shell) -> Judgement:
    try:
        fresh_copy(source, base, copy)
    except CheckoutError as e:
        return Judgement(Verdict.ENV_ERROR, f"the repository cannot be checked out: {e}")
    if task.setup:
        r = shell.run("setup", task.setup)
        if not r.ok:
            return Judgement(Verdict.ENV_ERROR, f"setup failed ({_how(r)}): {shell.tail('setup')}")
    try:
        apply(copy, patch, what="applying the agent's patch")
    except CheckoutError as e:
        return Judgement(Verdict.UNRESOLVED, str(e))
    try:
        restore(copy, base, patch_paths(task.test_patch))
        apply(copy, task.test_patch, what="applying the test patch")
    except CheckoutError as e:
        return Judgement(Verdict.ENV_ERROR, str(e))
    f2p = outcomes(shell, task.test, task.fail_to_pass, "fail_to_pass")
    p2p = outcomes(shell, task.test, task.pass_to_pass, "pass_to_pass")
    failing = [t for t, ok in f2p.items() if not ok] + [t for t, ok in p2p.items() if not ok]
    if failing:
        return Judgement(Verdict.UNRESOLVED, f"failing: {', '.join(failing[:5])}", f2p, p2p)
    return Judgement(Verdict.RESOLVED, "", f2p, p2p)


def _how(r: Any) -> str:
    if r.timed_out:
        return "timed out"
    return f"exit {r.exit_code}" if r.exit_code is not None else f"signal {r.signal}"


def probe(task: Task, source: Path, base: str, copy: Path, shell: Shell) -> Judgement:
    """The environment's probe: the judgement of no change at all must be `unresolved` with
    every FAIL_TO_PASS test failing and every PASS_TO_PASS test passing. Returns RESOLVED
    when the task can judge an agent here, ENV_ERROR (and why) when it cannot."""
    j = judge(task, source, base, "", copy, shell)
    if j.verdict == Verdict.ENV_ERROR:
        return j
    passing = [t for t, ok in j.fail_to_pass.items() if ok]
    broken = [t for t, ok in j.pass_to_pass.items() if not ok]
    if passing:
        why = f"FAIL_TO_PASS tests pass before any change, so they cannot judge a fix: {', '.join(passing[:5])}"
    elif broken:
        why = f"PASS_TO_PASS tests fail at the base commit here (the environment?): {', '.join(broken[:5])}"
    else:
        return Judgement(Verdict.RESOLVED, "", j.fail_to_pass, j.pass_to_pass, j.duration)
    return Judgement(Verdict.ENV_ERROR, why, j.fail_to_pass, j.pass_to_pass, j.duration)
