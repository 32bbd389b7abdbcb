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

from dataclasses import dataclass, field
from typing import Any, Literal

from mp_engine.errors import InvalidMPError
from mp_engine.inbox.header import decode, is_header_key, parse_header_line, parse_headers, sha256_hex
from mp_engine.inbox.lines import fence_open, heading, key_line

VALIDATE_TITLES = {"validate", "validation"}
COMMAND_LANGS = {"bash": "bash", "sh": "sh", "python": "py", "python3": "py", "py": "py"}
FILE_LANG = "file"


@dataclass(frozen=True)
class Block:
    """One executable fenced block: a command, a file to write, or a validation check."""

    kind: Literal["command", "file", "check"]
    index: int  # 1-based within its kind's sequence (steps or checks)
    line: int  # 1-based line of the opening fence
    body: str
    lang: str | None = None  # "bash", "sh" or "py" for commands and checks
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


def parse(data: bytes, *, max_bytes: int = 1024 * 1024) -> MicroProject:
    """Parse an MP file; raise `InvalidMPError` with a reason and one fix otherwise."""
    text = decode(data, max_bytes=max_bytes)
    lines = text.split("\n")
    head_idx, mp_id, title = parse_header_line(lines)
    headers, body_start = parse_headers(lines, head_idx + 1, mp_id)

    steps: list[Block] = []
    checks: list[Block] = []
    prose: list[tuple[int, str]] = []
    instructions: list[tuple[int, str]] = []
    notes: list[str] = []
    validate_level: int | None = None  # heading level of the open Validate section
    i = body_start
    while i < len(lines):
        line = lines[i]
        fence = fence_open(line)
        if fence is None:
            head = heading(line)
            if head:
                level, name = head[0], head[1].strip().lower().rstrip(":")
                if validate_level is not None and level <= validate_level:
                    validate_level = None
                if name in VALIDATE_TITLES:
                    validate_level = level
            key = key_line(line)
            if key and is_header_key(key[0]):
                notes.append(
                    f"line {i + 1}: `{key[0]}:` looks like a header but is not directly under the title, so it is ignored"
                )
            prose.append((i + 1, line))
            if validate_level is None:
                instructions.append((i + 1, line))
            i += 1
            continue
        indent, info = fence.indent, fence.info
        body_lines = []
        j = i + 1
        while j < len(lines) and not fence.closes(lines[j]):
            body_lines.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip(" \t"))
            j += 1
        if j >= len(lines):
            raise InvalidMPError(
                f"the code block opened at line {i + 1} is never closed; the file looks half-written or truncated",
                f"Close the block with {fence.marker} on its own line, or resend the whole file (write it under another name, then rename it into place).",
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
            notes.append(
                f"line {i + 1}: a ```{lang} block is not executed (only ```bash, ```sh, ```python and ```file are)"
            )
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
