"""The MP file format: parse bytes into a `MicroProject`, or refuse with one precise fix.

Format (see docs/PROTOCOL.md for the normative text):

    # MP-1.4 Optional title
    Timeout: 300                 <- optional `Key: value` lines directly under the title
    Approves: MP-1.3

    Prose for humans (and for the agent executor).

    ```bash                      <- a command step
    make test
    ```

    ```file src/hello.txt        <- a file step: writes the block's content
    hello
    ```

    ## Validate                  <- checks, run after the steps; any failure fails the MP
    ```bash
    test -f src/hello.txt
    ```

Parsing never executes anything and never returns half an MP: either every block is
understood or `InvalidMPError` is raised.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from mp_engine.core.errors import InvalidMPError
from mp_engine.inbox import expect as expectations
from mp_engine.inbox.header import HEADER_KEYS, decode, parse_header_line, parse_headers, sha256_hex
from mp_engine.inbox.lines import BLANKS, Fence, closing_fence, dedent, fence_open, heading, interesting
from mp_engine.inbox.metric import SYNTAX as METRIC_SYNTAX
from mp_engine.inbox.metric import Metric
from mp_engine.inbox.metric import parse as parse_metric

VALIDATE_TITLES = {"validate", "validation"}
COMMAND_LANGS = {"bash": "bash", "sh": "sh", "python": "py", "python3": "py", "py": "py"}
FILE_LANG = "file"
MAX_BLOCKS = 10_000  # fenced blocks in one MP
MAX_KEY_NOTES = 20  # notes about misplaced header keys; the last says there may be more
KEYS = tuple(HEADER_KEYS)
HEAD_LINES = 2 + len(HEADER_KEYS)  # the header line, its keys, the line that ends them
LEADING_BLANKS = re.compile(r"\s*")  # whitespace as `str.strip` sees it
Searcher = Callable[[str, int], re.Match[str] | None]  # `Pattern.search` from an offset


@dataclass(frozen=True)
class Block:
    """One executable fenced block: a command, a file to write, or a validation check."""

    kind: Literal["command", "file", "check"]
    index: int  # 1-based within its kind's sequence (steps or checks)
    line: int  # 1-based line of the opening fence
    body: str
    lang: str | None = None  # "bash", "sh" or "py" for commands and checks
    path: str | None = None  # for file blocks
    metric: Metric | None = None  # a Validate check's goal (metric.py)
    expect: expectations.Expect | None = None  # what a check's output must and must not say (expect.py)

    @property
    def step_id(self) -> str:
        return f"{'check' if self.kind == 'check' else 'step'}-{self.index:03d}"

    @property
    def script_name(self) -> str:
        """File stem of the script a command block runs, in the run's `steps/`."""
        return self.step_id

    @property
    def what(self) -> str:
        """The block in a few words: its language and first line, or the file it writes."""
        if self.kind == "file":
            return f"write {self.path}"
        first = next((ln.strip() for ln in self.body.splitlines() if ln.strip()), "(empty)")
        return f"{self.lang}: {first[:80]}"


@dataclass(frozen=True)
class MicroProject:
    mp_id: str
    title: str
    headers: dict[str, Any]
    steps: tuple[Block, ...]
    checks: tuple[Block, ...]
    text: str
    sha256: str
    # [start, end) line indexes of every line after the headers and outside the Validate
    # section, fenced blocks included: the instruction text the agent executor decomposes.
    instruction_ranges: tuple[tuple[int, int], ...] = ()
    notes: tuple[str, ...] = field(default=())  # warnings for `mp-engine check`

    @cached_property
    def body(self) -> tuple[tuple[int, str], ...]:
        """(line number, text) of each line of the instruction text (built on first use)."""
        lines = self.text.split("\n")
        return tuple((k + 1, lines[k]) for start, end in self.instruction_ranges for k in range(start, end))

    @property
    def approves(self) -> str | None:
        return self.headers.get("Approves")

    @property
    def answers(self) -> str | None:
        return self.headers.get("Answers")

    @property
    def executor(self) -> str | None:
        return self.headers.get("Executor")

    @property
    def repo(self) -> str | None:
        """`Repo:`: the `[repos.NAME]` repository the work is on (None: the channel's)."""
        return self.headers.get("Repo")

    def summary(self) -> dict[str, Any]:
        return {
            "mp_id": self.mp_id,
            "title": self.title,
            "headers": self.headers,
            "sha256": self.sha256,
            "steps": [{"id": b.step_id, "kind": b.kind, "line": b.line, "what": b.what} for b in self.steps],
            "checks": [{"id": b.step_id, "line": b.line, "what": b.what} for b in self.checks],
            "notes": list(self.notes),
        }


def parse(data: bytes, *, max_bytes: int = 1024 * 1024) -> MicroProject:
    """Parse an MP file; raise `InvalidMPError` with a reason and one fix otherwise.

    Linear in the input, and fast on hostile input (issue #20: a 1 MiB MP in well under
    100 ms): the body is never walked line by line in Python. Searches over the whole text
    (`lines.py`, each without ambiguous quantifiers) find the lines that matter (fences,
    the Validate heading, misplaced header keys); block bodies are sliced out whole; the
    instruction text the agent executor reads is kept as line ranges and built on demand.
    """
    text = decode(data, max_bytes=max_bytes)
    first, head_lines, body_pos = _head(text)
    head_idx, mp_id, title = parse_header_line(head_lines)
    headers, body_start = parse_headers(head_lines, head_idx + 1, mp_id)
    body_pos += sum(len(line) + 1 for line in head_lines[:body_start])
    p = _Body(text, mp_id)
    p.walk(body_pos, first + body_start)
    return MicroProject(
        mp_id=mp_id,
        title=title,
        headers=headers,
        steps=tuple(p.steps),
        checks=tuple(p.checks),
        text=text,
        sha256=sha256_hex(data),
        instruction_ranges=tuple(p.ranges),
        notes=tuple(p.notes),
    )


def _head(text: str) -> tuple[int, list[str], int]:
    """(index of the first non-blank line, the lines from there that can hold the header
    and its keys (the last is the rest of the text), that line's offset)."""
    # The blank lines before the header: the leading whitespace, back to its last newline.
    blanks = LEADING_BLANKS.match(text)
    assert blanks is not None  # `\s*` matches at the start of any text, if only the empty string
    pos = text.rfind("\n", 0, blanks.end()) + 1
    return text.count("\n", 0, pos), text[pos:].split("\n", HEAD_LINES), pos


class _Body:
    """One walk over an MP's body, from one line of interest to the next."""

    def __init__(self, text: str, mp_id: str):
        self.text, self.mp_id = text, mp_id
        self.steps: list[Block] = []
        self.checks: list[Block] = []
        self.notes: list[str] = []
        self.ranges: list[tuple[int, int]] = []  # [start, end) line indexes of instruction text
        self.blocks = 0
        self.misplaced_keys = 0

    def walk(self, pos: int, line_no: int) -> None:
        """From offset `pos`, the start of line index `line_no`, to the end. (The loop
        body is the per-line cost on hostile input: a line of interest every 11 bytes.)"""
        text, size = self.text, len(self.text)
        validate: int | None = None  # heading level of the open Validate section
        open_from: int | None = line_no  # start of the instruction range being built
        keys, ranges = KEYS, self.ranges
        search: Searcher = interesting(validate, keys).search
        searches: dict[int | None, Searcher] = {None: search}  # by `validate`, while `keys` stays
        while pos <= size and (m := search(text, pos)) is not None:
            start = m.start()
            i = line_no if start == pos else line_no + text.count("\n", pos, start)
            kind = m.lastgroup
            if kind == "valid":  # a Validate heading; the match ends with its line
                pos, line_no, level = m.end() + 1, i + 1, m.end("hashes") - start
                if validate is None and open_from is not None:
                    if open_from < i:
                        ranges.append((open_from, i))
                    open_from = None
            else:
                end = text.find("\n", m.end())
                end = size if end < 0 else end
                pos, line_no = end + 1, i + 1
                if kind == "other":  # a heading that closes the Validate section
                    level = None
                    open_from = i
                elif kind == "head":  # anything else `heading` must decide
                    level, is_validate = _heading(text[start:end])
                    if validate is not None and 0 < level <= validate:
                        open_from = i
                    if is_validate:
                        if open_from is not None and open_from < i:
                            ranges.append((open_from, i))
                        open_from = None
                    elif validate is not None and 0 < level <= validate:
                        level = None
                    else:
                        level = validate
                elif kind == "key":
                    self._misplaced_key(i, text[start:end])
                    if self.misplaced_keys >= MAX_KEY_NOTES and keys:
                        keys, searches = (), {}
                        search = interesting(validate, keys).search
                    continue
                else:
                    if (fence := fence_open(text[start:end])) is not None:
                        pos, line_no = self._block(fence, i, pos, validate is not None)
                    continue
            if level != validate:
                validate = level
                search = searches.get(validate) or searches.setdefault(validate, interesting(validate, keys).search)
        if open_from is not None:
            self.ranges.append((open_from, text.count("\n") + 1))

    def _misplaced_key(self, i: int, line: str) -> None:
        self.misplaced_keys += 1
        key = line.split(":", 1)[0].strip(BLANKS)
        if self.misplaced_keys < MAX_KEY_NOTES:
            self.notes.append(
                f"line {i + 1}: `{key}:` looks like a header but is not directly under the title, so it is ignored"
            )
        else:
            self.notes.append(
                f"line {i + 1} and maybe more: `{key}:` looks like a header but is not directly under the title; "
                "such lines are ignored"
            )

    def _block(self, fence: Fence, i: int, body_pos: int, in_validate: bool) -> tuple[int, int]:
        """Read the block opened at line `i`, whose body starts at `body_pos`; return the
        offset and the index of the line after it."""
        text, mp_id = self.text, self.mp_id
        self.blocks += 1
        if self.blocks > MAX_BLOCKS:
            raise InvalidMPError(
                f"the MP has more than {MAX_BLOCKS:,} code blocks",
                "Split the work into several MPs, or merge consecutive steps into one block.",
                line=i + 1,
                mp_id=mp_id,
            )
        close = closing_fence(fence).search(text, body_pos) if body_pos <= len(text) else None
        if close is None:
            raise InvalidMPError(
                f"the code block opened at line {i + 1} is never closed; the file looks half-written or truncated",
                f"Close the block with {fence.marker} on its own line, or resend the whole file (write it under another name, then rename it into place).",
                line=i + 1,
                mp_id=mp_id,
            )
        j = i + 1 + text.count("\n", body_pos, close.start())  # the closing line
        body = text[body_pos : close.start() - 1] if j > i + 1 else ""
        if fence.indent and body:
            body = dedent(fence.indent, body)
        words = fence.info.split(None, 1)
        lang = words[0].lower() if words else ""
        if lang in COMMAND_LANGS:
            seq = self.checks if in_validate else self.steps
            kind: Literal["command", "check"] = "check" if in_validate else "command"
            info = words[1] if len(words) > 1 else ""
            said = self._expect(info, i, in_validate)
            goal = self._metric(expectations.without(info), i, in_validate)
            lang_of = COMMAND_LANGS[lang]
            seq.append(Block(kind, len(seq) + 1, i + 1, body, lang_of, metric=goal, expect=said))
        elif lang == FILE_LANG:
            path = words[1].strip() if len(words) > 1 else ""
            if not path:
                raise InvalidMPError(
                    "a ```file block has no path",
                    "Write the target path after the tag, e.g. ```file src/app.py",
                    line=i + 1,
                    mp_id=mp_id,
                )
            if in_validate:
                raise InvalidMPError(
                    "a ```file block sits inside the Validate section; checks must be ```bash or ```sh blocks",
                    "Move the ```file block above the Validate heading.",
                    line=i + 1,
                    mp_id=mp_id,
                )
            content = body + "\n" if j > i + 1 else ""
            self.steps.append(Block(kind="file", index=len(self.steps) + 1, line=i + 1, body=content, path=path))
        elif lang:
            self.notes.append(
                f"line {i + 1}: a ```{lang} block is not executed (only ```bash, ```sh, ```python and ```file are)"
            )
        return close.end() + 1, j + 1

    def _metric(self, info: str, i: int, in_validate: bool) -> Metric | None:
        """The `metric="NAME OP TARGET"` of a check's fence (metric.py)."""
        try:
            goal = parse_metric(info)
        except ValueError as e:
            raise InvalidMPError(
                str(e), f"Correct the fence at line {i + 1}: {METRIC_SYNTAX}.", line=i + 1, mp_id=self.mp_id
            ) from e
        if goal is not None and not in_validate:
            raise InvalidMPError(
                f"the block at line {i + 1} has a metric but is a step, not a check",
                "Move it under the Validate heading (a metric is a check's goal), or drop metric=... from its fence.",
                line=i + 1,
                mp_id=self.mp_id,
            )
        return goal

    def _expect(self, info: str, i: int, in_validate: bool) -> expectations.Expect | None:
        """The `stdout_contains="..."` / `stdout_not_contains="..."` of a check's fence (expect.py)."""
        try:
            said = expectations.parse(info)
        except ValueError as e:
            raise InvalidMPError(
                str(e), f"Correct the fence at line {i + 1}: {expectations.SYNTAX}.", line=i + 1, mp_id=self.mp_id
            ) from e
        if said is not None and not in_validate:
            raise InvalidMPError(
                f"the block at line {i + 1} says what its output must contain but is a step, not a check",
                "Move it under the Validate heading (only checks are judged by their output), or drop "
                "stdout_contains=/stdout_not_contains= from its fence.",
                line=i + 1,
                mp_id=self.mp_id,
            )
        return said


def _heading(line: str) -> tuple[int, bool]:
    """(level, is it a Validate heading) of a line that may be a heading; level 0: none."""
    head = heading(line)
    if head is None:
        return 0, False
    return head[0], head[1].strip().lower().rstrip(":") in VALIDATE_TITLES


def parse_head(data: bytes, *, max_bytes: int = 1024 * 1024) -> tuple[str, str, dict[str, Any]]:
    """Only what `status` shows of a waiting MP: (id, title, headers). The body is not
    read; `mp-engine check` and the engine parse the whole file."""
    _, lines, _ = _head(decode(data, max_bytes=max_bytes))
    head_idx, mp_id, title = parse_header_line(lines)
    headers, _ = parse_headers(lines, head_idx + 1, mp_id)
    return mp_id, title, headers
