"""The line shapes an MP is made of, each recognised in time linear in the line's length.

An MP is untrusted input. The regular expressions these functions replace had a lazy
group between two runs of optional blanks (`[ \\t]*(.*?)[ \\t]*$`), which backtracks
quadratically or worse: a fence line of 6,000 blanks and a backtick took seconds, and
8,000 took minutes (issue #20). Here a line is split with `str` methods, and the only
regular expressions left match a bounded prefix without ambiguity.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BLANKS = " \t"
HEADER_HEAD_RE = re.compile(r"#[ \t]+(MP-(\d+)\.(\d+))(?![\w.])")
KEY_HEAD_RE = re.compile(r"([A-Za-z][A-Za-z0-9_-]*)[ \t]*:")


@dataclass(frozen=True)
class Fence:
    indent: str
    marker: str  # the run of backticks or tildes
    info: str  # the tag and what follows it

    def closes(self, line: str) -> bool:
        """True when `line` closes this fence (the same character, at least as many)."""
        body = line.strip(BLANKS)
        return len(body) >= len(self.marker) and body == self.marker[0] * len(body)


def fence_open(line: str) -> Fence | None:
    """A line opening a fenced block: blanks, three or more ` or ~, then an info string
    without backticks."""
    body = line.lstrip(BLANKS)
    if not body or body[0] not in "`~":
        return None
    run = len(body) - len(body.lstrip(body[0]))
    if run < 3:
        return None
    info = body[run:].strip(BLANKS)
    if "`" in info:
        return None
    return Fence(line[: len(line) - len(body)], body[:run], info)


def heading(line: str) -> tuple[int, str] | None:
    """A Markdown ATX heading: (level, text without the closing hashes)."""
    level = len(line) - len(line.lstrip("#"))
    if not 1 <= level <= 6 or len(line) == level or line[level] not in BLANKS:
        return None
    return level, line[level:].strip(BLANKS).rstrip(BLANKS + "#")


def header_line(line: str) -> tuple[str, str] | None:
    """`# MP-1.4 Title`: (the MP id, the rest of the line) or None."""
    m = HEADER_HEAD_RE.match(line)
    if not m:
        return None
    return m.group(1), line[m.end() :].strip(BLANKS)


def key_line(line: str) -> tuple[str, str] | None:
    """`Key: value`: (key, value) or None."""
    m = KEY_HEAD_RE.match(line)
    if not m:
        return None
    return m.group(1), line[m.end() :].strip(BLANKS)
