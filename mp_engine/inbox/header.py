"""The MP's header: `# MP-X.Y Title` as the first non-blank line, then `Key: value` lines.

Decoding (size cap, binary, UTF-8, BOM, line endings) comes first; the header names the
MP, so every refusal after it can say which MP it was.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

from mp_engine.core.errors import InvalidMPError
from mp_engine.inbox.lines import header_line, key_line

MP_ID_RE = re.compile(r"^MP-\d+\.\d+$")
# What a header with a typo looks like (`# MP 1.6`, `#MP-1.4`, `# mp-1.4`, `## MP-1.4`,
# `# MP-1_4`); bounded quantifiers only, so it stays linear on any input.
NEAR_HEADER_RE = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]{0,8}mp[ \t_:\-]{0,3}(\d{1,9})[.\-_,](\d{1,9})(?=[ \t:]|$)", re.I)

FIX_HEADER = "Make the first non-blank line a header such as `# MP-1.4 Short title`."


UNIT_RE = re.compile(r"^\s*(\d{1,9}(?:\.\d{1,6})?)\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)\s*$", re.I)
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


def _positive_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        # Python's "could not convert string to float" says nothing to the MP's author (issue #44).
        unit = UNIT_RE.match(value)
        if unit:
            n = float(unit[1]) * UNIT_SECONDS[unit[2][0].lower()]
            raise ValueError(f"must be a number of seconds: write `{n:g}`, not `{value.strip()}`") from None
        raise ValueError("must be a number of seconds, like 600 for ten minutes") from None
    if not 0 < seconds < float("inf"):
        raise ValueError("must be a positive number of seconds")
    return seconds


RUN_ID_RE = re.compile(r"^\d{8}T\d{6}(?:\.\d+)?Z?-[A-Za-z0-9._-]+$")


def _mp_ref(value: str) -> str:
    """An MP id (`MP-1.3`) or, for a file that had no readable header, its run id."""
    value = value.strip()
    if not (MP_ID_RE.match(value) or RUN_ID_RE.match(value)):
        raise ValueError("must name the failed MP, e.g. MP-1.3, or the run id shown in its result")
    return value


def _executor(value: str) -> str:
    value = value.strip().lower()
    if value not in ("shell", "agent"):
        raise ValueError("must be `shell` or `agent`")
    return value


def _plan(value: str) -> str:
    value = value.strip().lower()
    if value not in ("auto", "list", "review"):
        raise ValueError(
            "must be `auto` (a planner level plans the work), `review` (it plans, and the plan waits for a "
            "person's approval) or `list` (one micro-task per list item)"
        )
    return value


def _positive_int(value: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise ValueError("must be a whole number, 1 or more") from None
    if number < 1:
        raise ValueError("must be a whole number, 1 or more")
    return number


def _dollars(value: str) -> float:
    try:
        amount = float(value.strip().removeprefix("$"))
    except ValueError:
        raise ValueError("must be an amount of US dollars, like 2.50") from None
    if not amount > 0:
        raise ValueError("must be an amount of US dollars above 0, like 2.50")
    return amount


def _level_names(value: str) -> tuple[str, ...]:
    names = tuple(n for n in re.split(r"[\s,]+", value.strip()) if n)
    if not names:
        raise ValueError("must name levels of the agent chain, like `Levels: aider, claude`")
    if len(set(names)) != len(names):
        raise ValueError("names a level twice")
    return names


# `Repo:` names a `[repos.NAME]` table (config/repos.py keeps the same rule).
REPO_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# A branch git accepts (git-check-ref-format), kept conservative: no spaces, no control
# characters, none of `~^:?*[\\`, no `..` or `@{`, no leading `-` or `/`, no `.lock` end.
BRANCH_RE = re.compile(r"^(?![-./])(?!.*(?:\.\.|@\{|//|/\.|\.lock$|\.lock/|/$|\.$))[^\x00-\x20~^:?*\[\\\x7f]{1,200}$")


def _repo_name(value: str) -> str:
    value = value.strip()
    if not REPO_NAME_RE.match(value):
        raise ValueError("must name a repository of `[repos]` in mp-engine.toml, like `Repo: app`")
    return value


def _branch(value: str) -> str:
    value = value.strip()
    if not BRANCH_RE.match(value) or value == "@":
        raise ValueError("must be a branch name, like `main` or `release/2.0`")
    return value


def _globs(value: str) -> tuple[str, ...]:
    globs = tuple(g for g in re.split(r"[\s,]+", value.strip()) if g)
    if not globs:
        raise ValueError("must name paths or globs the agent may change, like `Allow-Changes: tests/test_api.py`")
    return globs


def _issue_number(value: str) -> int:
    return _positive_int(value.strip().removeprefix("#"))


# Canonical header keys: parser and one-line help. Matching is case-insensitive.
HEADER_KEYS: dict[str, tuple[Callable[[str], Any], str]] = {
    "Timeout": (_positive_seconds, "whole-MP timeout in seconds"),
    "Step-Timeout": (_positive_seconds, "per-step timeout in seconds"),
    "Approves": (_mp_ref, "id of the failed MP this one approves, lifting the halt"),
    "Answers": (_mp_ref, "id of the agent MP that asked a question; this MP's text is the answer, and its run goes on"),
    "Executor": (_executor, "`shell` (default) or `agent`"),
    "Plan": (_plan, "agent MPs: `auto` (the planner level plans), `review` (and a person approves the plan) or `list`"),
    "Max-Parallel": (_positive_int, "agent MPs: at most this many micro-tasks at once (lowers `[agent] max_parallel`)"),
    "Max-Iterations": (_positive_int, "agent MPs: agent iterations for this MP (`[agent] max_iterations`)"),
    "Levels": (_level_names, "agent MPs: only these levels of the chain, in its order (`Levels: aider, claude`)"),
    "Wall-Budget": (_positive_seconds, "agent MPs: active seconds for this MP when it has no `Timeout:`"),
    "Max-Cost-USD": (_dollars, "agent MPs: dollars this MP's agent calls may cost (`[agent] max_cost_usd`)"),
    "Repo": (_repo_name, "agent MPs: the `[repos.NAME]` repository to work on instead of the channel's"),
    "Base": (_branch, "with `Repo:`: the branch to start from and to land on (the repository's `base` otherwise)"),
    "Issue": (_issue_number, "with `Repo:`: the issue the work answers (`Issue: 12`): linked and commented once"),
    "Allow-Changes": (_globs, "agent MPs: files that judge the work the agent may change anyway (`tests/**`)"),
}
_KEY_LOOKUP = {k.lower(): k for k in HEADER_KEYS}


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def decode(data: bytes, *, max_bytes: int) -> str:
    """Bytes to text, refusing what is not an MP: empty, too big, binary, not UTF-8."""
    if len(data) > max_bytes:
        raise InvalidMPError(
            f"the MP file is {len(data)} bytes, over the {max_bytes}-byte cap",
            "Split the work into smaller MPs, or raise `[engine] max_mp_bytes` in mp-engine.toml.",
        )
    if not data.strip():
        raise InvalidMPError(
            "the MP file is empty", "Write the MP's header and steps into the file, then send it again."
        )
    nul = data.find(b"\0")
    if nul >= 0:
        raise InvalidMPError(
            f"the MP file is binary (NUL byte at offset {nul})",
            "Send the MP as UTF-8 text; attach binary data through the repository instead.",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidMPError(
            f"the MP file is not valid UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start})",
            "Save the file as UTF-8 (for example `iconv -t UTF-8`) and send it again.",
        ) from e
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def suggest_header(line: str) -> str | None:
    """The header a near miss meant (`# MP 1.6 Typo` -> `# MP-1.6 Typo`), or None."""
    m = NEAR_HEADER_RE.match(line[:400])
    if not m:
        return None
    rest = line[m.end() : m.end() + 200].strip().lstrip("-–—:| \t")
    return f"# MP-{int(m.group(1))}.{int(m.group(2))}" + (f" {rest}" if rest else "")


def parse_header_line(lines: list[str]) -> tuple[int, str, str]:
    """Find `# MP-X.Y Title` as the first non-blank line; return (index, id, title)."""
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        m = header_line(line)
        if not m:
            shown = line.strip()[:60]
            meant = suggest_header(line)
            fix = f"Write the first line as `{meant}`." if meant else FIX_HEADER
            raise InvalidMPError(
                f"the first non-blank line is {shown!r}, not an `# MP-<major>.<minor>` header", fix, line=i + 1
            )
        title = m[1].lstrip("-–—:| \t")
        return i, m[0], title
    raise InvalidMPError("the MP file has no header", FIX_HEADER)


def parse_headers(lines: list[str], start: int, mp_id: str) -> tuple[dict[str, Any], int]:
    headers: dict[str, Any] = {}
    i = start
    while i < len(lines):
        m = key_line(lines[i])
        if not m:
            break
        raw_key, value = m
        key = _KEY_LOOKUP.get(raw_key.lower())
        if key is None:
            known = ", ".join(HEADER_KEYS)
            raise InvalidMPError(
                f"unknown header key {raw_key!r}; the known keys are {known}",
                f"Remove or rename `{raw_key}:`; to keep it as prose, put a blank line between the title and it.",
                line=i + 1,
                mp_id=mp_id,
            )
        if key in headers:
            raise InvalidMPError(
                f"header key {key!r} appears twice", f"Keep one `{key}:` line.", line=i + 1, mp_id=mp_id
            )
        parse, help_text = HEADER_KEYS[key]
        try:
            headers[key] = parse(value)
        except ValueError as e:
            raise InvalidMPError(
                f"header `{key}: {value}` is invalid ({e})", f"Set `{key}:` to {help_text}.", line=i + 1, mp_id=mp_id
            ) from e
        i += 1
    return headers, i


def is_header_key(name: str) -> bool:
    """True for a known header key, in any case (`timeout`, `Step-Timeout`)."""
    return name.lower() in _KEY_LOOKUP


def header_summary(data: bytes) -> str:
    """An MP's first line without its `#` (`MP-1.4 Title`), for messages."""
    first = next((ln for ln in data[:4096].decode("utf-8", errors="replace").splitlines() if ln.strip()), "")
    return first.lstrip("# ").strip()[:80] or "an unreadable MP"
