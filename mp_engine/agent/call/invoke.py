"""One agent call: run the CLI and say what happened.

The call runs through `process.run_process` (own process group, scrubbed environment,
output to files): a per-call timeout, and an idle timeout (no output for N seconds means
the agent hangs: its whole group is killed). The outcome is classified so the loop can
act on it:

    ok           the CLI exited 0 (its claims are parsed and checked separately)
    usage_limit  the provider's usage or rate limit; `resume_at` parsed where printed
    billing      the account has no credit left (no reset to wait for): a person must pay
    transient    an outage (overloaded, 5xx, connection reset): retried with backoff
    auth         not logged in, bad API key: no retry helps
                 (recognised also after exit 0 when no status block came: aider)
    not_found    the CLI could not be started
    unreachable  in the sandbox, it could not connect to a host the rules do not allow
    config       the CLI cannot be started this way (the prompt is too long for argv)
    timeout      per-call or idle timeout: the iteration failed, the loop goes on
    crash        any other non-zero exit or signal: the iteration failed
    interrupted  a second stop signal killed it; the iteration is retried on restart
    turn_limit   it stopped at its turn limit, or ran past it (the CLI's own report says):
                 a failed iteration whatever the checks say (issue #42)
    budget       not made: the engine's daily or monthly budget is spent (issue #42); it
                 runs after the reset
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from mp_engine.core.errors import ProcessError
from mp_engine.execute.process import ProcessResult, run_process


class CallKind(StrEnum):
    """How one agent call ended (`classify`)."""

    OK = "ok"  # it answered (its claims and the checks decide the rest)
    INTERRUPTED = "interrupted"  # a second stop signal or a cancel killed it: it runs again
    USAGE_LIMIT = "usage_limit"  # the provider's usage or rate limit: it runs again after `resume_at`
    TIMEOUT = "timeout"  # the call timeout, or no output for the idle timeout: a failed iteration
    CRASH = "crash"  # it failed otherwise: a failed iteration
    AUTH = "auth"  # not logged in, a bad key (401/403)
    BILLING = "billing"  # no credit left on the account
    NOT_FOUND = "not_found"  # the CLI is not installed
    TRANSIENT = "transient"  # an outage that outlasted the retries
    CONFIG = "config"  # the CLI cannot be started this way (the prompt does not fit its argv)
    UNREACHABLE = "unreachable"  # the sandbox kept it from a host it is configured to reach
    FLEET = "fleet"  # the fleet could not run the attempt (its workers failed it every time, docs/FLEET.md)
    INTEGRATION = "integration"  # an integration's record, shown like a call (run/integrator.py)
    TURN_LIMIT = "turn_limit"  # it stopped at, or ran past, its level's `max_turns` (issue #42)
    BUDGET = "budget"  # not made: `[agent] daily_cost_usd` or `monthly_cost_usd` is spent (issue #42)


# The kinds of call that end the run BLOCKED: no retry helps, a person must act.
ENDS_RUN = frozenset(
    {
        CallKind.AUTH,
        CallKind.BILLING,
        CallKind.NOT_FOUND,
        CallKind.TRANSIENT,
        CallKind.CONFIG,
        CallKind.FLEET,
        CallKind.UNREACHABLE,
    }
)

# The kinds of call that answered but whose work never passes the gate: the limit is the
# verdict (claude-code-action #1577: 73 turns under `--max-turns 60`, reported as success).
NEVER_PASSES = frozenset({CallKind.TURN_LIMIT})


@dataclass
class Call:
    kind: CallKind
    exit_code: int | None = None
    signal: int | None = None
    duration: float = 0.0
    timed_out: bool = False
    idle_timed_out: bool = False
    detail: str = ""
    resume_at: str | None = None  # ISO UTC, for usage_limit
    usage: dict[str, Any] | None = None  # tokens and dollars, as the CLI reported them (structured.py)
    environment: str | None = None  # its every command failed outside the task (structured.py)
    host: str | None = None  # the host:port an `unreachable` call could not reach, when known

    def __post_init__(self) -> None:
        self.kind = CallKind(self.kind)

    @property
    def ends_run(self) -> bool:
        """The CLI cannot work this way (the one list of such kinds): the run ends BLOCKED."""
        return self.kind in ENDS_RUN

    @property
    def pauses(self) -> bool:
        """The call did not finish and runs again later: a stop, or a usage limit to wait out."""
        return self.kind in (CallKind.INTERRUPTED, CallKind.USAGE_LIMIT, CallKind.BUDGET)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Call:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def run_agent(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    idle_timeout: float,
    stdout_path: Path,
    stderr_path: Path,
    stdin_path: Path | None,
    stop_now: threading.Event,
    kill_grace: float,
    on_spawn: Callable[[int], None] | None = None,
    markers: Sequence[str] = (),
    give_up: Callable[[], bool] | None = None,
) -> ProcessResult | ProcessError:
    try:
        return run_process(
            argv,
            cwd=cwd,
            env=env,
            timeout=timeout,
            idle_timeout=idle_timeout,
            stdout_path=stdout_path,
            stderr_path=stderr_path,
            stdin_path=stdin_path,
            stop_now=stop_now,
            kill_grace=kill_grace,
            on_spawn=on_spawn,
            markers=markers,
            give_up=give_up,
        )
    except ProcessError as e:
        return e


# Linux refuses any one argument over MAX_ARG_STRLEN (32 pages) and all of them together
# (with the environment) over ARG_MAX: "Argument list too long".
MAX_ARG_STRLEN = 131072


def argv_problem(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """Why `argv` cannot be passed to exec (too long), or None."""
    longest = max((len(a.encode()) for a in argv), default=0)
    if longest >= MAX_ARG_STRLEN:
        return f"one argument is {longest:,} bytes, over the kernel's {MAX_ARG_STRLEN:,}-byte limit per argument"
    try:
        arg_max = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError):
        arg_max = 2 * 1024 * 1024
    total = sum(len(a.encode()) + 1 for a in argv) + sum(len(k) + len(v) + 2 for k, v in env.items())
    if total >= arg_max - 4096:
        return f"the command line and environment are {total:,} bytes, over the kernel's limit ({arg_max:,})"
    return None
