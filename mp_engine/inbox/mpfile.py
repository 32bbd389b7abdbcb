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

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from mp_engine.errors import InvalidMPError

HEADER_RE = re.compile(r"^#[ \t]+(MP-(\d+)\.(\d+))(?![\w.])[ \t]*(.*?)[ \t]*$")
MP_ID_RE = re.compile(r"^MP-\d+\.\d+$")
KEY_LINE_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*)[ \t]*:[ \t]*(.*?)[ \t]*$")
FENCE_OPEN_RE = re.compile(r"^([ \t]*)(`{3,}|~{3,})[ \t]*([^`]*?)[ \t]*$")
HEADING_RE = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
VALIDATE_TITLES = {"validate", "validation"}
COMMAND_LANGS = {"bash": "bash", "sh": "sh"}
FILE_LANG = "file"

FIX_HEADER = "Make the first non-blank line a header such as `# MP-1.4 Short title`."


def _positive_seconds(value: str) -> float:
    seconds = float(value)
    if not seconds > 0:
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


# Canonical header keys: parser and one-line help. Matching is case-insensitive.
HEADER_KEYS: dict[str, tuple[Callable[[str], Any], str]] = {
    "Timeout": (_positive_seconds, "whole-MP timeout in seconds"),
    "Step-Timeout": (_positive_seconds, "per-step timeout in seconds"),
    "Approves": (_mp_ref, "id of the failed MP this one approves, lifting the halt"),
    "Executor": (_executor, "`shell` (default) or `agent`"),
}
_KEY_LOOKUP = {k.lower(): k for k in HEADER_KEYS}


@dataclass(frozen=True)
class Block:
    """One executable fenced block: a command, a file to write, or a validation check."""

    kind: Literal["command", "file", "check"]
    index: int  # 1-based within its kind's sequence (steps or checks)
    line: int  # 1-based line of the opening fence
    body: str
    lang: str | None = None  # "bash" or "sh" for commands and checks
    path: str | None = None  # for file blocks

    @property
    def step_id(self) -> str:
        return f"{'check' if self.kind == 'check' else 'step'}-{self.index:03d}"

    @property
    def script_name(self) -> str:
        """File stem of the script a command block runs, in the run's `steps/`."""
        return self.step_id

    def describe(self) -> str:
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
    prose: tuple[tuple[int, str], ...] = ()  # (line number, text) outside fences, after the headers
    # (line number, text) of every line after the headers and outside the Validate section,
    # fenced blocks included: the instruction text the agent executor decomposes.
    body: tuple[tuple[int, str], ...] = ()
    notes: tuple[str, ...] = field(default=())  # warnings for `mp-engine check`

    @property
    def approves(self) -> str | None:
        return self.headers.get("Approves")

    @property
    def executor(self) -> str | None:
        return self.headers.get("Executor")

    def summary(self) -> dict[str, Any]:
        return {
            "mp_id": self.mp_id,
            "title": self.title,
            "headers": self.headers,
            "sha256": self.sha256,
            "steps": [{"id": b.step_id, "kind": b.kind, "line": b.line, "what": b.describe()} for b in self.steps],
            "checks": [{"id": b.step_id, "line": b.line, "what": b.describe()} for b in self.checks],
            "notes": list(self.notes),
        }


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


def parse_header_line(lines: list[str]) -> tuple[int, str, str]:
    """Find `# MP-X.Y Title` as the first non-blank line; return (index, id, title)."""
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        m = HEADER_RE.match(line)
        if not m:
            shown = line.strip()[:60]
            raise InvalidMPError(
                f"the first non-blank line is {shown!r}, not an `# MP-<major>.<minor>` header", FIX_HEADER, line=i + 1
            )
        title = m.group(4).lstrip("-–—:| \t")
        return i, m.group(1), title
    raise InvalidMPError("the MP file has no header", FIX_HEADER)


def _parse_headers(lines: list[str], start: int, mp_id: str) -> tuple[dict[str, Any], int]:
    headers: dict[str, Any] = {}
    i = start
    while i < len(lines):
        m = KEY_LINE_RE.match(lines[i])
        if not m:
            break
        raw_key, value = m.group(1), m.group(2)
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


def parse(data: bytes, *, max_bytes: int = 1024 * 1024) -> MicroProject:
    """Parse an MP file; raise `InvalidMPError` with a reason and one fix otherwise."""
    text = decode(data, max_bytes=max_bytes)
    lines = text.split("\n")
    head_idx, mp_id, title = parse_header_line(lines)
    headers, body_start = _parse_headers(lines, head_idx + 1, mp_id)

    steps: list[Block] = []
    checks: list[Block] = []
    prose: list[tuple[int, str]] = []
    instructions: list[tuple[int, str]] = []
    notes: list[str] = []
    validate_level: int | None = None  # heading level of the open Validate section
    i = body_start
    while i < len(lines):
        line = lines[i]
        fence = FENCE_OPEN_RE.match(line)
        if fence is None:
            heading = HEADING_RE.match(line)
            if heading:
                level, name = len(heading.group(1)), heading.group(2).strip().lower().rstrip(":")
                if validate_level is not None and level <= validate_level:
                    validate_level = None
                if name in VALIDATE_TITLES:
                    validate_level = level
            key = KEY_LINE_RE.match(line)
            if key and key.group(1).lower() in _KEY_LOOKUP:
                notes.append(
                    f"line {i + 1}: `{key.group(1)}:` looks like a header but is not directly under the title, so it is ignored"
                )
            prose.append((i + 1, line))
            if validate_level is None:
                instructions.append((i + 1, line))
            i += 1
            continue
        indent, marker, info = fence.group(1), fence.group(2), fence.group(3)
        close_re = re.compile(rf"^[ \t]*{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
        body_lines = []
        j = i + 1
        while j < len(lines) and not close_re.match(lines[j]):
            body_lines.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip(" \t"))
            j += 1
        if j >= len(lines):
            raise InvalidMPError(
                f"the code block opened at line {i + 1} is never closed; the file looks half-written or truncated",
                f"Close the block with {marker} on its own line, or resend the whole file (write it under another name, then rename it into place).",
                line=i + 1,
                mp_id=mp_id,
            )
        body = "\n".join(body_lines)
        words = info.split(None, 1)
        lang = words[0].lower() if words else ""
        in_validate = validate_level is not None
        if not in_validate:
            instructions.extend((k + 1, lines[k]) for k in range(i, j + 1))
        if lang in COMMAND_LANGS:
            seq = checks if in_validate else steps
            kind = "check" if in_validate else "command"
            seq.append(Block(kind=kind, index=len(seq) + 1, line=i + 1, body=body, lang=COMMAND_LANGS[lang]))
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
            content = body + "\n" if body_lines else ""
            steps.append(Block(kind="file", index=len(steps) + 1, line=i + 1, body=content, path=path))
        elif lang:
            notes.append(f"line {i + 1}: a ```{lang} block is not executed (only ```bash, ```sh and ```file are)")
        i = j + 1

    return MicroProject(
        mp_id=mp_id,
        title=title,
        headers=headers,
        steps=tuple(steps),
        checks=tuple(checks),
        text=text,
        sha256=sha256_hex(data),
        prose=tuple(prose),
        body=tuple(instructions),
        notes=tuple(notes),
    )


def require_executable(mp: MicroProject) -> None:
    """For the shell executor: an MP with no steps and no checks is an error."""
    if not mp.steps and not mp.checks:
        raise InvalidMPError(
            "the MP has nothing to execute: no ```bash, ```sh or ```file block",
            "Put each command in a fenced ```bash block (or set `Executor: agent` for natural-language work).",
            mp_id=mp.mp_id,
        )
