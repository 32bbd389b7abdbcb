"""What a Validate check's output must and must not say (issue #44; the Micro-Task
Executor's `stdout_contains` / `stdout_not_contains` on a validation's expected result):

    ```bash stdout_contains="3 passed" stdout_not_contains="DeprecationWarning"
    pytest -q tests/test_app.py
    ```

The check passes when it exits 0, its standard output contains every `stdout_contains`
text and none of the `stdout_not_contains` texts: plain text, case-sensitive, anywhere in
the output (across lines too). Each attribute may be given more than once. An exit code
other than 0 fails the check as always; the texts only narrow what exit 0 proves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ATTR = re.compile(r"""\b(stdout_contains|stdout_not_contains)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
BARE = re.compile(r"\bstdout_(?:not_)?contains\s*=")
SYNTAX = 'stdout_contains="TEXT" or stdout_not_contains="TEXT" (quoted, not empty)'
CHUNK = 1 << 20  # bytes read at a time: an output of any size is searched in bounded memory


@dataclass(frozen=True)
class Expect:
    contains: tuple[str, ...] = ()
    not_contains: tuple[str, ...] = ()

    def __str__(self) -> str:
        said = [f"contain {t!r}" for t in self.contains] + [f"not contain {t!r}" for t in self.not_contains]
        return "its output must " + " and ".join(said)

    def verdict(self, stdout: Path) -> dict[str, Any]:
        """What the output at `stdout` showed: `missing` (texts it should contain and does
        not), `unwanted` (texts it contains and should not), `met`."""
        found = scan(stdout, (*self.contains, *self.not_contains))
        missing = [t for t in self.contains if t not in found]
        unwanted = [t for t in self.not_contains if t in found]
        return {
            "contains": list(self.contains),
            "not_contains": list(self.not_contains),
            "missing": missing,
            "unwanted": unwanted,
            "met": not missing and not unwanted,
        }


def parse(info: str) -> Expect | None:
    """The expectations in a fence's info string after its language, or None. Raises
    ValueError, saying what is wrong, for an unquoted or empty one."""
    contains: list[str] = []
    not_contains: list[str] = []
    for m in ATTR.finditer(info):
        text = m.group(2) if m.group(2) is not None else m.group(3)
        if not text:
            raise ValueError(f"{m.group(1)} is empty, which every output contains; write {SYNTAX}")
        (contains if m.group(1) == "stdout_contains" else not_contains).append(text)
    if BARE.search(without(info)):
        raise ValueError(f"a stdout_contains or stdout_not_contains attribute is not quoted; write {SYNTAX}")
    if not contains and not not_contains:
        return None
    return Expect(tuple(contains), tuple(not_contains))


def without(info: str) -> str:
    """`info` with the quoted expectations taken out, so that their texts are not read as
    other attributes (a `metric=` inside one)."""
    return ATTR.sub(" ", info)


def scan(path: Path, texts: tuple[str, ...]) -> set[str]:
    """Which of `texts` occur in the file at `path` (none when it is missing), read in
    chunks that overlap by the longest text, so a text across two chunks is found."""
    wanted = {t: t.encode("utf-8") for t in texts}
    if not wanted:
        return set()
    overlap = max(len(b) for b in wanted.values()) - 1
    found: set[str] = set()
    tail = b""
    try:
        with open(path, "rb") as f:
            while len(found) < len(wanted) and (chunk := f.read(CHUNK)):
                window = tail + chunk
                found |= {t for t, b in wanted.items() if t not in found and b in window}
                tail = window[-overlap:] if overlap else b""
    except FileNotFoundError:
        pass
    return found
