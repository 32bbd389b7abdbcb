"""The decisive lines of a failing command's output, for a diagnosis no rule explains: the
lines that say what went wrong (the last error-looking ones, not the last lines, which
are usually a summary, a stack tail or a make footer), and a concrete next step when the
tool is one a reader knows: pytest's first failing test, the make target whose recipe
failed, the npm script that failed."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A line that says what failed, as common tools print it. Ordered by nothing: any match
# marks the line; the last few marked lines are quoted in output order.
ERROR_LINE = re.compile(
    r"^E\s{2,}\S"  # pytest's assertion detail
    r"|^FAILED\s\S"  # pytest's short summary
    r"|^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Failure)\b:?"  # a Python exception line
    r"|\b(?:error|fatal|failed|failure|panic)\b[:!]"  # `error:`, `fatal:`, `npm error!`...
    r"|^npm (?:ERR!|error)\s"
    r"|^make(?:\[\d+\])?: \*\*\*"
    r"|^\s*(?:✖|✗|×)\s"  # test runners' crosses
    r"|\bAssertionError\b|\bassert(?:ion)? failed\b"
    r"|^\s*FAIL\s+\S",  # jest, go test
    re.I,
)
NOISE = re.compile(
    r"^npm (?:ERR!|error) (?:A complete log|Lifecycle|Failed at|This is probably|code|path|command|errno|syscall)\b",
    re.I,
)
PYTEST_FAILED = re.compile(r"^FAILED (\S+)")
MAKE_TARGET = re.compile(r"^make(?:\[\d+\])?: \*\*\* \[([^\]]+)\] Error (\d+)")
NPM_SCRIPT = re.compile(r"^> \S+@\S+ ([\w:.-]+)$")  # npm's banner before it runs a script
MAKE_PLACE = re.compile(r"^(.+):(\d+): (.+)$")  # GNU make 4: `Makefile:4: build`


@dataclass(frozen=True)
class Decisive:
    lines: list[str]  # the decisive lines, in output order
    next_step: str | None  # a concrete next step for a known tool, or None


def decisive(text: str, limit: int = 6) -> Decisive:
    """The decisive lines of `text` (stderr then stdout) and the next step they suggest."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    marked = [ln for ln in lines if ERROR_LINE.search(ln) and not NOISE.search(ln)]
    picked = list(dict.fromkeys(marked))[-limit:] if marked else lines[-3:]
    return Decisive([ln[:300] for ln in picked], _next_step(lines))


def _next_step(lines: list[str]) -> str | None:
    failed = [m.group(1) for ln in lines if (m := PYTEST_FAILED.match(ln))]
    if failed:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return f"make the first failing test pass: `{failed[0]}`{more}; run it alone with `pytest {failed[0]}`"
    targets = [m for ln in lines if (m := MAKE_TARGET.match(ln))]
    if targets:  # the innermost failure comes first
        where, code = targets[0].group(1), targets[0].group(2)
        place = MAKE_PLACE.match(where)
        target = f"`{place.group(3)}` ({place.group(1)} line {place.group(2)})" if place else f"`{where}`"
        return f"fix the recipe of make's target {target}, which exited {code}; the lines before make's say why"
    scripts = [m.group(1) for ln in lines if (m := NPM_SCRIPT.match(ln))]
    if scripts:
        return (
            f"fix what the npm script `{scripts[-1]}` runs (package.json's `scripts`); the lines above say what failed"
        )
    return None
