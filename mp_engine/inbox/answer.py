"""Answers to an agent MP that ended asking a person (issue #32): a task said it is blocked,
or reached the hard gate. Its result says so, the engine halts on it as on any ERROR, and
its run stays resumable: an answer lifts the halt and the same run goes on, on
`mp/<MP-id>`, with the question and the answer in the blocked task's next prompt.

An answer names the MP on a line `Answers: MP-ID` (a line `MT: MT-002` may say which task,
default the one that asked); everything after the first blank line is the answer. It
arrives three ways:
- `Claude_Inbox/answer.txt`, committed by the orchestrator (`mp-engine send --answer`, MCP
  `answer`) and pulled, or dropped by hand: source `inbox`;
- `SYSTEM/.engine/answer`, written by `mp-engine answer` on the engine host: source `host`;
- an MP in the inbox whose header says `Answers: MP-ID`; its body is the answer (admit.py).

A file is consumed (removed) once it had its effect or was refused; the event says which.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from mp_engine.core.atomic import atomic_write
from mp_engine.core.workspace import INBOX_DIR, Workspace
from mp_engine.inbox.header import MP_ID_RE

ANSWER_FILE = "answer.txt"  # in Claude_Inbox/
ANSWER_PATH = f"{INBOX_DIR}/{ANSWER_FILE}"  # as git names it
HOST_FILE = "answer"  # in SYSTEM/.engine/
MAX_BYTES = 64 * 1024
MT_RE = re.compile(r"^MT-\d{3}$")


@dataclass(frozen=True)
class Answer:
    mp_id: str
    text: str
    mt: str | None  # the task it answers (None: the one that asked)
    source: str  # "inbox", "host" or "mp:<MP-id>"
    path: Path | None  # the file to consume (None: an MP's body, consumed with the MP)


class NotAnAnswer(ValueError):
    """The file names no MP (`Answers: MP-ID`) or says nothing."""


def parse(data: bytes, source: str, path: Path | None = None) -> Answer:
    """`Answers: MP-ID` (and `MT: MT-NNN`) lines up to the first blank line, then the
    answer. An MP-style `# MP-x.y` title line before them is allowed and ignored."""
    text = data[:MAX_BYTES].decode("utf-8", errors="replace").replace("\r\n", "\n")
    head, _, body = text.strip("\n").partition("\n\n")
    mp_id = mt = None
    for line in head.splitlines():
        key, sep, value = line.partition(":")
        if line.startswith("#") or not sep:
            continue
        if key.strip().lower() == "answers":
            mp_id = value.strip()
        elif key.strip().lower() == "mt":
            mt = value.strip()
    if not mp_id or not MP_ID_RE.match(mp_id):
        raise NotAnAnswer("it names no MP: its first lines must say `Answers: MP-ID`")
    if mt is not None and not MT_RE.match(mt):
        raise NotAnAnswer(f"`MT: {mt}` is not a micro-task id (MT-001, ...)")
    if not body.strip():
        raise NotAnAnswer("it has no answer: write it after a blank line below `Answers:`")
    return Answer(mp_id, body.strip(), mt, source, path)


def inbox_path(ws: Workspace) -> Path:
    return ws.inbox_dir / ANSWER_FILE


def host_path(ws: Workspace) -> Path:
    return ws.local_dir / HOST_FILE


def requested(ws: Workspace) -> bool:
    """Whether an answer file waits (one `stat` each: the engine's idle pass asks)."""
    return inbox_path(ws).exists() or host_path(ws).exists()


def pending(ws: Workspace) -> Answer | NotAnAnswer | None:
    """The answer waiting to be taken (the host's first), a file that is no answer (to
    refuse), or None."""
    for path, source in ((host_path(ws), "host"), (inbox_path(ws), "inbox")):
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_BYTES)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            continue
        try:
            return parse(data, source, path)
        except NotAnAnswer as e:
            e.path = path  # type: ignore[attr-defined]
            return e
    return None


def write_host(ws: Workspace, mp_id: str, text: str, mt: str | None = None) -> Path:
    """`mp-engine answer`: the answer for the engine on this host to take."""
    head = f"Answers: {mp_id}\n" + (f"MT: {mt}\n" if mt else "")
    path = host_path(ws)
    atomic_write(path, f"{head}\n{text.strip()}\n")
    return path


def render(mp_id: str, text: str, mt: str | None = None) -> str:
    """The content of `Claude_Inbox/answer.txt` (`send --answer`, MCP `answer`)."""
    return f"Answers: {mp_id}\n" + (f"MT: {mt}\n" if mt else "") + f"\n{text.strip()}\n"


def consume(path: Path | None) -> None:
    if path is not None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
