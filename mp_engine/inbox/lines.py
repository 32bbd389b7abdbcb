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
from functools import lru_cache

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


# The first character of a line of interest, then a look back that it starts its line.
# A search whose pattern starts with a character class skips every other character in C
# (about 3 ms per MiB, against 70 ms for `^` tried at each of a million empty lines).
AT_LINE_START = r"(?<![^\n].)"
_FENCE = r"(?<=[ \t`~])(?:(?<=[ \t])[ \t]*(?:`{3,}|~{3,})|(?<=`)`{2,}|(?<=~)~{2,})[^`\n]*$(?P<fence>)"
# After the first `#` of a heading. `valid`: exactly a Validate heading as `heading` reads
# it (its name, then only colons, blanks and closing hashes). `other` (inside a Validate
# section): a heading of level <= the section's whose name cannot be Validate. Anything
# else that may be a Validate heading (say, Unicode blanks before the name) is left to
# `heading`. `*+` is possessive: blanks given back could never start the name.
_NAME = r"(?i:validat)"
_VALID = rf"(?P<hashes>#{{0,5}})[ \t](?P<valid>[ \t]*{_NAME}(?i:e|ion):*[ \t#]*$)"
_MAYBE_VALID = rf"#{{0,5}}[ \t][^\S\n]*{_NAME}"


@lru_cache(maxsize=64)
def interesting(validate: int | None, keys: tuple[str, ...]) -> re.Pattern[str]:
    """The lines of an MP body that change what the parser does, as one search over the
    text, so the parser never walks the other lines in Python:
      `fence`  a possible block opening (`fence_open` decides): blanks, three or more
               backticks or tildes, an info string without a backtick;
      `head`   outside a Validate section, a heading that may open one; inside one of
               level `validate`, also any heading that may close it. The groups `valid`
               (with `hashes`, the level less one) and `other` classify the common
               cases; otherwise `heading` decides;
      `key`    a line starting with one of `keys` and a colon: a header in the wrong place.
    Every part is followed by something it cannot match, so a failed try gives back
    nothing worth trying again: the search is linear in the text."""
    head = [_VALID]
    if validate is not None:
        head.append(rf"(?P<other_hashes>#{{0,{validate - 1}}})[ \t](?P<other>[^\S\n]*+(?!{_NAME}))")
    head.append(_MAYBE_VALID + "(?P<head>)")
    # Each part first looks back at the character already matched, and a heading first
    # looks ahead for its shape: most lines of interest fail at once (`#` lines of a
    # comment block, blank-led prose).
    parts = [r"(?<=#)(?=#{0,5}[ \t])(?:" + "|".join(head) + ")", _FENCE]
    first = " \t`~#"
    if keys:
        # The key's first letter is the character already matched: look back at it.
        alts = "|".join(rf"(?<={re.escape(k[0])}){re.escape(k[1:])}" for k in sorted(keys, key=len, reverse=True))
        parts.append(rf"(?<=[A-Za-z])(?i:{alts})[ \t]*:(?P<key>)")
        first += "".join(sorted({c for k in keys for c in (k[0].lower(), k[0].upper())}))
    return re.compile(rf"[{re.escape(first)}]{AT_LINE_START}(?:" + "|".join(parts) + ")", re.M)


@lru_cache(maxsize=64)
def _closing(char: str, count: int) -> re.Pattern[str]:
    return re.compile(rf"^[ \t]*{re.escape(char)}{{{count},}}[ \t]*$", re.M)


def closing_fence(fence: Fence) -> re.Pattern[str]:
    """A search for the first line that closes `fence` (`Fence.closes`, over the text)."""
    return _closing(fence.marker[0], len(fence.marker))


@lru_cache(maxsize=64)
def _dedent(indent: str) -> re.Pattern[str]:
    return re.compile(rf"^(?:{re.escape(indent)}|[ \t]*)", re.M)


def dedent(indent: str, body: str) -> str:
    """A block's lines without the fence's indentation: `indent` where a line starts with
    it, else all its leading blanks."""
    return _dedent(indent).sub("", body)
