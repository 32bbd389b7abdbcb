"""One agent call: run the CLI and say what happened.

The call runs through `process.run_process` (own process group, scrubbed environment,
output to files): a per-call timeout, and an idle timeout (no output for N seconds means
the agent hangs: its whole group is killed). The outcome is classified so the loop can
act on it:

    ok           the CLI exited 0 (its claims are parsed and checked separately)
    usage_limit  the provider's usage or rate limit; `resume_at` parsed where printed
    transient    an outage (overloaded, 5xx, connection reset): retried with backoff
    auth         not logged in, bad API key: no retry helps
    not_found    the CLI could not be started
    timeout      per-call or idle timeout: the iteration failed, the loop goes on
    crash        any other non-zero exit or signal: the iteration failed
    interrupted  a second stop signal killed it; the iteration is retried on restart
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mp_engine.errors import ProcessError
from mp_engine.execute.process import ProcessResult, run_process

USAGE_RE = re.compile(
    r"usage limit|rate[ -]limit|quota (?:exceeded|reached)|hit your (?:usage )?limit|limit reached|"
    r"too many requests|\b429\b|insufficient_quota|out of credits|credit balance is too low",
    re.I,
)
AUTH_RE = re.compile(
    r"invalid (?:x-)?api[ _-]?key|authentication (?:failed|error)|unauthori[sz]ed|\b401\b|not logged in|"
    r"please (?:run )?/?log ?in|login required|missing api key|no api key|api key not (?:found|set)",
    re.I,
)
TRANSIENT_RE = re.compile(
    r"overloaded|\b50[0234]\b|\b529\b|service unavailable|bad gateway|internal server error|"
    r"connection (?:reset|refused|error|closed)|ECONNRESET|ETIMEDOUT|temporarily unavailable|network error",
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
UNITS = {"h": 3600, "m": 60, "s": 1}


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
        )
    except ProcessError as e:
        return e


def _line(text: str, pattern: re.Pattern[str]) -> str:
    for line in text.splitlines():
        if pattern.search(line):
            return line.strip()[:300]
    return ""


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
    m = CLOCK_RE.search(text)
    if m and (m.group(3) or m.group(2)):
        hour, minute, ampm, zone = int(m.group(1)), int(m.group(2) or 0), (m.group(3) or "").lower(), m.group(4)
        if ampm == "pm" and hour < 12:
            hour += 12
        elif ampm == "am" and hour == 12:
            hour = 0
        if hour > 23 or minute > 59:
            return None
        try:
            tz = ZoneInfo(zone) if zone and zone.upper() != "UTC" else (UTC if zone else None)
        except (ZoneInfoNotFoundError, ValueError):
            tz = None
        local_now = now.astimezone(tz) if tz else now.astimezone()
        when = local_now.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if when <= local_now:
            when += timedelta(days=1)
        return when.astimezone(UTC)
    return None


def classify(
    res: ProcessResult | ProcessError, text: str, *, status_seen: bool, now: datetime, fallback_wait: float
) -> Call:
    """Classify one call from its process result and its output (stdout + stderr tail)."""
    if isinstance(res, ProcessError):
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
    # A CLI that prints a usage-limit notice may still exit 0; a real answer has a status block.
    if (failed or not status_seen) and USAGE_RE.search(text):
        when = parse_reset(text, now) or now + timedelta(seconds=fallback_wait)
        call.kind, call.detail = "usage_limit", _line(text, USAGE_RE)
        call.resume_at = when.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        return call
    if not failed:
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
