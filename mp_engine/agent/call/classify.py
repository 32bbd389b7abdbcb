"""What one agent call's end says (issue #16; as an ordered table of rules since issue #40):
ok, interrupted, a usage or rate limit and when it lifts, a timeout, a crash, or a CLI that
cannot work (auth, billing, not installed, an outage, a configuration, a host the sandbox
does not allow), read from its process result and its own error output, with a CLI's
structured output deciding first."""

from __future__ import annotations

import errno
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mp_engine.agent.call.invoke import Call, CallKind
from mp_engine.agent.call.network import (
    Network,
    blocked_host,
    down_detail,
    down_host,
    last_failure,
    refused_detail,
    said_host,
)
from mp_engine.core.errors import ProcessError
from mp_engine.execute.process import ProcessResult

MESSAGE_SPAN = 3  # lines kept on each side of the line that matched, within its paragraph
MESSAGE_CHARS = 600
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
    r"connection ?(?:reset|refused|error|closed)|ECONNRESET|ETIMEDOUT|temporarily unavailable|network error|"
    r"experiencing high demand|stream disconnected before completion|unable to connect to api",
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
# claude's plain-text end at its turn limit: "Error: Reached max turns (3)" (exit 1).
TURNS_RE = re.compile(r"Reached max(?:imum number of)? turns \((\d+)\)", re.I)
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


def _zone(name: str | None) -> tzinfo | None:
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


@dataclass(frozen=True)
class Ended:
    """One call as `classify`'s rules read it: how its process ended and what it printed."""

    res: ProcessResult
    text: str  # its output (stdout + stderr tail): the CLI's own error where it has one
    status_seen: bool  # a status block (the agent answered, whatever its exit code)
    now: datetime
    fallback_wait: float
    rate_wait: float | None
    api_status: int | None  # from a CLI's structured output (structured.py)
    resets_at: str | None
    turns: int | None = None  # model turns, as the CLI's report counted them
    max_turns: int | None = None  # the level's limit (issue #42)
    turn_limit: bool = False  # the CLI's report says it stopped at its limit
    network: Network | None = None  # None: not sandboxed

    @property
    def over_turns(self) -> bool:
        """It stopped at its turn limit, or ran past it (the CLI's own report says so)."""
        past = self.max_turns is not None and self.turns is not None and self.turns > self.max_turns
        return self.turn_limit or past or (self.failed and TURNS_RE.search(self.text) is not None)

    @property
    def net(self) -> Network:
        """The network of a call the rules know was sandboxed."""
        assert self.network is not None
        return self.network

    @property
    def failed(self) -> bool:
        return self.res.exit_code != 0

    @property
    def unanswered(self) -> bool:
        """It failed, or printed no status block: its own error output decides. (A CLI that
        prints a usage-limit notice may still exit 0, and aider exits 0 after an API error.)"""
        return self.failed or not self.status_seen

    @property
    def unconnected(self) -> str:
        """In the sandbox, what the CLI last said about not connecting ("" when it did not,
        or when an API answered it)."""
        if self.network is None or not self.unanswered or self.api_status is not None:
            return ""
        return last_failure(self.text)


def _usage_limit(e: Ended) -> tuple[str, str]:
    wait = e.fallback_wait if e.rate_wait is None or QUOTA_RE.search(e.text) else e.rate_wait
    when = parse_reset(e.text, e.now) or e.now + timedelta(seconds=wait)
    if e.resets_at:
        when = max(datetime.fromisoformat(e.resets_at.replace("Z", "+00:00")), e.now)
    return _line(e.text, USAGE_RE) or e.text.strip()[:300], when.astimezone(UTC).isoformat(timespec="seconds").replace(
        "+00:00", "Z"
    )


def _turns(e: Ended) -> tuple[str, None]:
    limit = f"--max-turns {e.max_turns}" if e.max_turns is not None else "its turn limit"
    if e.turn_limit or (e.failed and TURNS_RE.search(e.text)):
        return f"the CLI stopped at {limit} before the task was done ({e.turns or '?'} turns)", None
    return f"the call ran {e.turns} turns, past {limit}: its report is not believed", None


def _api_error(e: Ended) -> str:
    return f"API error {e.api_status}: {e.text.strip().splitlines()[0][:300] if e.text.strip() else ''}"


@dataclass(frozen=True)
class CallRule:
    """`when` reads an ended call; `says` gives its kind, its detail and (a usage limit) when it
    may run again. The first rule that applies decides."""

    when: Callable[[Ended], object]
    kind: CallKind
    says: Callable[[Ended], tuple[str, str | None]]
    names: Callable[[Ended], str | None] = lambda e: None  # the host a sandboxed call could not reach


CALL_RULES: list[CallRule] = [
    CallRule(lambda e: e.res.interrupted, CallKind.INTERRUPTED, lambda e: ("stopped by a second stop signal", None)),
    CallRule(lambda e: e.res.idle_timed_out, CallKind.TIMEOUT, lambda e: ("no output for the idle timeout", None)),
    CallRule(lambda e: e.res.timed_out, CallKind.TIMEOUT, lambda e: ("the call timeout expired", None)),
    # The CLI's own report of its turns (issue #42): at or past the limit is never success.
    CallRule(lambda e: e.over_turns, CallKind.TURN_LIMIT, _turns),
    # A CLI's structured output decides before any text pattern.
    CallRule(lambda e: e.failed and e.api_status in (401, 403), CallKind.AUTH, lambda e: (_api_error(e), None)),
    CallRule(lambda e: e.failed and (e.api_status or 0) >= 500, CallKind.TRANSIENT, lambda e: (_api_error(e), None)),
    CallRule(
        lambda e: e.unanswered and BILLING_RE.search(e.text) and parse_reset(e.text, e.now) is None and not e.resets_at,
        CallKind.BILLING,
        lambda e: (_line(e.text, BILLING_RE), None),
    ),
    CallRule(
        lambda e: (e.failed and e.api_status == 429) or (e.unanswered and USAGE_RE.search(e.text)),
        CallKind.USAGE_LIMIT,
        _usage_limit,
    ),
    CallRule(
        lambda e: (
            not e.failed
            and (e.status_seen or not (AUTH_RE.search(e.text) or TRANSIENT_RE.search(e.text) or e.unconnected))
        ),
        CallKind.OK,
        lambda e: ("", None),
    ),
    CallRule(
        lambda e: e.res.exit_code == 127,
        CallKind.NOT_FOUND,
        lambda e: (_line(e.text, re.compile(r"not found|No such file")) or "exit code 127", None),
    ),
    CallRule(lambda e: AUTH_RE.search(e.text), CallKind.AUTH, lambda e: (_line(e.text, AUTH_RE), None)),
    # In the sandbox (issue #44, network.py): the endpoint allowed, but the engine's host could
    # not reach it either, is an outage, named; a connection that failed to a host the rules do
    # not allow, or where the relay never joined the CLI to its API, is one the sandbox
    # refused (after it did, to no host it names: the rules below).
    CallRule(
        lambda e: e.unconnected and e.network and e.network.down,
        CallKind.TRANSIENT,
        lambda e: (down_detail(e.unconnected, e.net), None),
        lambda e: down_host(e.net),
    ),
    CallRule(
        lambda e: e.unconnected and (not e.net.through or said_host(e.unconnected, e.net)),
        CallKind.UNREACHABLE,
        lambda e: (refused_detail(e.unconnected, e.net), None),
        lambda e: blocked_host(e.unconnected, e.net),
    ),
    CallRule(lambda e: TRANSIENT_RE.search(e.text), CallKind.TRANSIENT, lambda e: (_line(e.text, TRANSIENT_RE), None)),
    CallRule(
        lambda e: True,
        CallKind.CRASH,
        lambda e: (f"killed by signal {e.res.signal}" if e.res.signal else f"exit code {e.res.exit_code}", None),
    ),
]


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
    turns: int | None = None,
    max_turns: int | None = None,
    turn_limit: bool = False,
    network: Network | None = None,
) -> Call:
    """Classify one call from its process result and its output (stdout + stderr tail), by
    the first of `CALL_RULES` that applies. Without a parsable reset, a quota or plan limit
    waits `fallback_wait`; a plain rate limit (429, "per-minute") waits `rate_wait` (a
    minute, not half an hour). `api_status` and `resets_at` come from a CLI's structured
    output (structured.py) and decide before any text pattern; `turns` and `turn_limit`
    are its report of the call's turns, held to the level's `max_turns`. `network`: the call
    ran in the sandbox, with these hosts."""
    if isinstance(res, ProcessError):
        cause = res.__cause__
        if isinstance(cause, OSError) and cause.errno == errno.E2BIG:
            return Call(CallKind.CONFIG, detail=f"{res}: the prompt is too long for the command line")
        return Call(CallKind.NOT_FOUND, detail=str(res))
    ended = Ended(
        res,
        text,
        status_seen,
        now,
        fallback_wait,
        rate_wait,
        api_status,
        resets_at,
        turns,
        max_turns,
        turn_limit,
        network,
    )
    rule = next(r for r in CALL_RULES if r.when(ended))
    detail, resume_at = rule.says(ended)
    return Call(
        rule.kind,
        exit_code=res.exit_code,
        signal=res.signal,
        duration=res.duration,
        timed_out=res.timed_out,
        idle_timed_out=res.idle_timed_out,
        detail=detail,
        resume_at=resume_at,
        host=rule.names(ended),
    )
