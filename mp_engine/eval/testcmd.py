"""The judge's commands: a repository's setup and its test command, run with bash in a copy,
each in its own process group under a timeout, its output kept in the task's logs.

A test command names the tests with `{tests}` (all of them in one run: `python -m pytest -q
{tests}`) or `{test}` (one run per test). With `{tests}`, a group that fails is run again one
test at a time (up to `PER_TEST_MAX` tests) to say which failed; the verdict needs only the
group's exit code, the report the detail.
"""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mp_engine.execute.process import ProcessResult, run_process

PER_TEST_MAX = 50
KILL_GRACE = 5.0


@dataclass(frozen=True)
class Shell:
    """Where the judge's commands run, where their output goes, and what stops them."""

    cwd: Path
    logs: Path
    timeout: float = 1800.0
    stop_now: threading.Event | None = None

    def run(self, name: str, command: str) -> ProcessResult:
        """`command` with bash in `cwd`; its output in `logs/NAME.out` and `.err`."""
        self.logs.mkdir(parents=True, exist_ok=True)
        return run_process(
            ["bash", "-c", command],
            cwd=self.cwd,
            env=environment(),
            timeout=self.timeout,
            stdout_path=self.logs / f"{name}.out",
            stderr_path=self.logs / f"{name}.err",
            stop_now=self.stop_now,
            kill_grace=KILL_GRACE,
        )

    def tail(self, name: str, limit: int = 600) -> str:
        """The end of a command's output, for a verdict's `why`."""
        text = ""
        for suffix in ("out", "err"):
            try:
                text += (self.logs / f"{name}.{suffix}").read_text(errors="replace")
            except OSError:
                pass
        return text.strip()[-limit:]


def environment() -> dict[str, str]:
    """The judge's commands get the environment a person's shell gives the test suite, less
    mp-engine's own overrides (they are meant for the engine, not for the project)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("MP_ENGINE_")}


def render(template: str, tests: Sequence[str]) -> str:
    quoted = " ".join(shlex.quote(t) for t in tests)
    return template.replace("{tests}", quoted).replace("{test}", quoted)


class Interrupted(Exception):
    """The eval is stopping now: a command was cut short, and proves nothing."""


def outcomes(shell: Shell, template: str, tests: Sequence[str], name: str) -> dict[str, bool]:
    """{test: passed} of `tests` in `shell`; raises `Interrupted` when a stop cut it short."""
    if not tests:
        return {}
    if "{tests}" in template:
        if _passed(shell, name, render(template, tests)):
            return dict.fromkeys(tests, True)
        if len(tests) == 1 or len(tests) > PER_TEST_MAX:
            return dict.fromkeys(tests, False)
    return {t: _passed(shell, f"{name}-{i + 1:03d}", render(template, [t])) for i, t in enumerate(tests)}


def _passed(shell: Shell, name: str, command: str) -> bool:
    r = shell.run(name, command)
    if r.interrupted:
        raise Interrupted(name)
    return r.ok
