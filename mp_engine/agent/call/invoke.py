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
    config       the CLI cannot be started this way (the prompt is too long for argv)
    timeout      per-call or idle timeout: the iteration failed, the loop goes on
    crash        any other non-zero exit or signal: the iteration failed
    interrupted  a second stop signal killed it; the iteration is retried on restart
"""

from __future__ import annotations

import errno
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mp_engine.core.errors import ProcessError
from mp_engine.execute.process import ProcessResult, run_process

USAGE_RE = re.compile(
    r"usage limit|rate[ -]limit|quota (?:exceeded|reached)|hit your (?:[\w-]+ )?limit|limit reached|"
    r"(?:session|weekly|daily|opus|sonnet|5-hour) limit|usage_limit_reached|"
    r"too many requests|\b429\b|insufficient_quota|out of credits|credit balance is too low",
    re.I,
)
AUTH_RE = re.compile(
    r"(?:invalid|incorrect) (?:x-)?api[ _-]?key|authentication ?(?:failed|error)|not able to authenticate|"
    r"unauthori[sz]ed|\b401\b|not logged in|"
    r"please (?:run )?/?log ?in|login required|missing api key|no api key|api key not (?:found|set)",
    re.I,
)
TRANSIENT_RE = re.compile(
    r"overloaded|\b50[0234]\b|\b529\b|service unavailable|bad gateway|internal server error|"
    r"connection (?:reset|refused|error|closed)|ECONNRESET|ETIMEDOUT|temporarily unavailable|network error|"
    r"experiencing high demand|stream disconnected before completion",
    re.I,
)
# Of those, the ones that say a quota or plan limit (hours away), not a per-minute rate.
QUOTA_RE = re.compile(
    r"usage limit|quota (?:exceeded|reached)|exceeded your (?:current )?quota|hit your (?:[\w-]+ )?limit|(?<!rate )limit reached|(?:session|weekly|daily|opus|sonnet|5-hour) limit|"
    r"usage_limit_reached|insufficient_quota|out of credits|credit balance",
    re.I,
)
# No credit left on a pay-as-you-go account: nothing resets by itself, so no wait helps.
BILLING_RE = re.compile(
    r"credit balance is too low|insufficient_quota|exceeded your current quota|out of credits|"
    r"billing hard limit|check your plan and billing",
    re.I,
)
EPOCH_RE = re.compile(r"limit reached\|(\d{10})\b", re.I)  # Claude Code: "...usage limit reached|1735689600"
ISO_RE = re.compile(
    r"(?:reset|until|after|at)\D{0,20}(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?)"
)
IN_RE = re.compile(
    r"(?:try again|retry|resets?|available)\s+(?:in|after)\s+((?:\d+\s*(?:h|hr|hrs|hours?|m|min|mins|minutes?|s|sec|secs|seconds?)\b[\s,and]*)+)",
    re.I,
)
CLOCK_RE = re.compile(
    r"(?:resets?|try again|available)\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*(am|pm)?(?:\s*\(([A-Za-z_]+/[A-Za-z_/]+|UTC)\))?",
    re.I,
)
# codex: "try again at Nov 25th, 2026 12:10 AM"; claude: "resets Nov 27, 8pm (UTC)".
DATE_RE = re.compile(
    r"(?:resets?|try again|available)\s+(?:at\s+|on\s+)?"
    r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s*(\d{4})?,?\s*"
    r"(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*(am|pm)?(?:\s*\(([A-Za-z_]+/[A-Za-z_/]+|UTC)\))?",
    re.I,
)
MONTHS = {
    m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))
}
# A stated clock time this close behind "now" means now (the same minute), never tomorrow.
JUST_PASSED = timedelta(minutes=15)
UNITS = {"h": 3600, "m": 60, "s": 1}


# The kinds of call that end the run BLOCKED: no retry helps, a person must act. `fleet`:
# the fleet could not run the attempt (its workers failed it every time, docs/FLEET.md).
ENDS_RUN = frozenset({"auth", "billing", "not_found", "transient", "config", "fleet"})


@dataclass
class Call:
    kind: str
    exit_code: int | None = None
    signal: int | None = None
    duration: float = 0.0
    timed_out: bool = False
    idle_timed_out: bool = False
    detail: str = ""
    resume_at: str | None = None  # ISO UTC, for usage_limit
    usage: dict[str, Any] | None = None  # tokens and dollars, as the CLI reported them (structured.py)
    environment: str | None = None  # its every command failed outside the task (structured.py)

    @property
    def ends_run(self) -> bool:
        """The CLI cannot work this way (the one list of such kinds): the run ends BLOCKED."""
        return self.kind in ENDS_RUN

    @property
    def pauses(self) -> bool:
        """The call did not finish and runs again later: a stop, or a usage limit to wait out."""
        return self.kind in ("interrupted", "usage_limit")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Call:
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__ if k in data})


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


MESSAGE_SPAN = 3  # lines kept on each side of the line that matched, within its paragraph
MESSAGE_CHARS = 600


def _line(text: str, pattern: re.Pattern[str]) -> str:
    """The whole message the first line matching `pattern` belongs to: a CLI wraps a
    provider's message over lines (aider's "...current quota, / please check your plan and
    billing details."), so the neighbouring lines of its paragraph come with it, joined."""
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if pattern.search(line)), None)
    if at is None:
        return ""
    start, end = at, at + 1
    while start > max(0, at - MESSAGE_SPAN) and lines[start - 1].strip():
        start -= 1
    while end < min(len(lines), at + 1 + MESSAGE_SPAN) and lines[end].strip():
        end += 1
    message = " ".join(ln.strip() for ln in lines[start:end])
    return message if len(message) <= MESSAGE_CHARS else message[: MESSAGE_CHARS - 3] + "..."


def parse_reset(text: str, now: datetime) -> datetime | None:
    """The reset time a usage-limit message announces, as UTC, or None."""
    m = EPOCH_RE.search(text)
    if m:
        return datetime.fromtimestamp(int(m.group(1)), UTC)
    m = ISO_RE.search(text)
    if m:
        raw = m.group(1).replace(" ", "T").replace("Z", "+00:00")
        try:
            when = datetime.fromisoformat(raw)
            return when.replace(tzinfo=when.tzinfo or UTC).astimezone(UTC)
        except ValueError:
            pass
    m = IN_RE.search(text)
    if m:
        seconds = sum(
            int(n) * UNITS[u[0].lower()]
            for n, u in re.findall(r"(\d+)\s*([a-z]+)", m.group(1), re.I)
            if u[0].lower() in UNITS
        )
        if seconds:
            return now + timedelta(seconds=seconds)
    m = DATE_RE.search(text)
    if m:
        return _dated(m, now)
    m = CLOCK_RE.search(text)
    if m and (m.group(3) or m.group(2)):
        hour = _hour(int(m.group(1)), m.group(3))
        minute = int(m.group(2) or 0)
        if hour is None or minute > 59:
            return None
        local_now = now.astimezone(_zone(m.group(4)))
        when = local_now.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if when <= local_now - JUST_PASSED:
            when += timedelta(days=1)
        return _end_of_minute(when.astimezone(UTC), now)
    return None


def _hour(hour: int, ampm: str | None) -> int | None:
    ampm = (ampm or "").lower()
    if ampm == "pm" and hour < 12:
        hour += 12
    elif ampm == "am" and hour == 12:
        hour = 0
    return hour if hour <= 23 else None


def _zone(name: str | None):
    """The stated zone, or the host's local zone when none is stated."""
    if not name:
        return None
    if name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _dated(m: re.Match[str], now: datetime) -> datetime | None:
    """A reset on a stated day: never in the past (a year-less date that passed is next year's)."""
    month, day = MONTHS[m.group(1)[:3].lower()], int(m.group(2))
    hour, minute = _hour(int(m.group(4)), m.group(6)), int(m.group(5) or 0)
    if hour is None or minute > 59:
        return None
    tz = _zone(m.group(7))
    local_now = now.astimezone(tz)
    year = int(m.group(3)) if m.group(3) else local_now.year
    try:
        when = local_now.replace(year=year, month=month, day=day, hour=hour, minute=minute, second=0, microsecond=0)
    except ValueError:
        return None
    if not m.group(3) and when < local_now - JUST_PASSED:
        when = when.replace(year=year + 1)
    return _end_of_minute(when.astimezone(UTC), now)


def _end_of_minute(minute: datetime, now: datetime) -> datetime:
    """A reset stated to the minute lifts at the latest when that minute ends (codex prints
    its exact `resets_at` cut to the minute: "try again at 2:43 PM" for 14:43:27), so the
    wait ends then: never before the reset, so the retry does not meet the same limit again,
    and never in the past."""
    return max(minute + timedelta(minutes=1), now)


def classify(
    res: ProcessResult | ProcessError,
    text: str,
    *,
    status_seen: bool,
    now: datetime,
    fallback_wait: float,
    rate_wait: float | None = None,
    api_status: int | None = None,
    resets_at: str | None = None,
) -> Call:
    """Classify one call from its process result and its output (stdout + stderr tail).
    Without a parsable reset, a quota or plan limit waits `fallback_wait`; a plain rate
    limit (429, "per-minute") waits `rate_wait` (a minute, not half an hour).
    `api_status` and `resets_at` come from a CLI's structured output (structured.py) and
    decide before any text pattern."""
    if isinstance(res, ProcessError):
        cause = res.__cause__
        if isinstance(cause, OSError) and cause.errno == errno.E2BIG:
            return Call("config", detail=f"{res}: the prompt is too long for the command line")
        return Call("not_found", detail=str(res))
    call = Call(
        "ok",
        exit_code=res.exit_code,
        signal=res.signal,
        duration=res.duration,
        timed_out=res.timed_out,
        idle_timed_out=res.idle_timed_out,
    )
    if res.interrupted:
        call.kind, call.detail = "interrupted", "stopped by a second stop signal"
        return call
    if res.timed_out or res.idle_timed_out:
        call.kind = "timeout"
        call.detail = "no output for the idle timeout" if res.idle_timed_out else "the call timeout expired"
        return call
    failed = res.exit_code != 0
    if failed and api_status is not None and (api_status in (401, 403) or api_status >= 500):
        call.kind = "auth" if api_status < 500 else "transient"
        call.detail = f"API error {api_status}: {text.strip().splitlines()[0][:300] if text.strip() else ''}"
        return call
    # A CLI that prints a usage-limit notice may still exit 0 (and aider exits 0 after an
    # API error): without a status block, its own error output decides.
    if (failed or not status_seen) and BILLING_RE.search(text) and parse_reset(text, now) is None and not resets_at:
        call.kind, call.detail = "billing", _line(text, BILLING_RE)
        return call
    if (failed and api_status == 429) or ((failed or not status_seen) and USAGE_RE.search(text)):
        wait = fallback_wait if rate_wait is None or QUOTA_RE.search(text) else rate_wait
        when = parse_reset(text, now) or now + timedelta(seconds=wait)
        if resets_at:
            when = max(datetime.fromisoformat(resets_at.replace("Z", "+00:00")), now)
        call.kind, call.detail = "usage_limit", _line(text, USAGE_RE) or text.strip()[:300]
        call.resume_at = when.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        return call
    if not failed and (status_seen or not (AUTH_RE.search(text) or TRANSIENT_RE.search(text))):
        return call
    if res.exit_code == 127:
        call.kind, call.detail = "not_found", _line(text, re.compile(r"not found|No such file")) or "exit code 127"
    elif AUTH_RE.search(text):
        call.kind, call.detail = "auth", _line(text, AUTH_RE)
    elif TRANSIENT_RE.search(text):
        call.kind, call.detail = "transient", _line(text, TRANSIENT_RE)
    else:
        call.kind = "crash"
        call.detail = f"killed by signal {res.signal}" if res.signal else f"exit code {res.exit_code}"
    return call
