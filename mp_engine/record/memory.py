"""The repository's memory, `SYSTEM/memory.md` (issue #34): what earlier agent MPs taught,
carried into every later agent prompt so the next MP's agent does not repeat a mistake
the last one was corrected for.

A section per MP run that taught something, newest last:

    # Memory of this repository
    ...
    <!-- run: 20261126T101500Z-ab12 -->
    ## MP-7.1 (2026-11-26)
    - `pytest -q` (check-001) failed first with `E   ModuleNotFoundError: ...`; ...

The lessons come from the engine's own records (agent/lessons.py): checks that failed and
then passed, and a person's answers. An agent's words never enter it. Secrets are masked
before the file is written (it travels with the results). Past `[agent] memory_max_bytes`
the oldest sections go first; a lesson already remembered is not written twice. The file
is the channel's: an orchestrator reads it beside the results, and replaces it with an
ordinary `file` block (`SYSTEM/memory.md` is not an engine-owned path).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from mp_engine.core.atomic import atomic_write
from mp_engine.core.workspace import Workspace

MEMORY_FILE = "memory.md"
TITLE = (
    "# Memory of this repository\n\n"
    "Lessons of earlier agent MPs, written by mp-engine from their checks and a person's answers\n"
    "(never from an agent's claims). Every agent prompt carries this file. Replace it with a `file`\n"
    "block for `SYSTEM/memory.md`, or delete it, to change what later MPs remember."
)
SECTION_RE = re.compile(r"^<!-- run: (\S+) -->$", re.M)
COMPACTION = "<!-- [COMPACTION] {n} older MP section(s) dropped: the file is kept under {limit} bytes -->"
COMPACTION_RE = re.compile(r"^<!-- \[COMPACTION\] (\d+) older MP section\(s\) dropped.*-->$", re.M)


def path_of(ws: Workspace) -> Path:
    return ws.system_dir / MEMORY_FILE


def read(ws: Workspace) -> str:
    try:
        return path_of(ws).read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def _sections(text: str) -> tuple[str, int, list[tuple[str, str]]]:
    """(the head before the first section, sections dropped so far, [(run id, section)])."""
    found = list(SECTION_RE.finditer(text))
    head = text[: found[0].start()] if found else text
    dropped = COMPACTION_RE.search(head)
    head = COMPACTION_RE.sub("", head).strip("\n")
    out = []
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        out.append((m.group(1), text[m.start() : end].strip("\n")))
    return head, int(dropped.group(1)) if dropped else 0, out


def remember(
    ws: Workspace,
    *,
    mp_id: str,
    run_id: str,
    day: str,
    lessons: list[str],
    max_bytes: int,
    redact: Callable[[str], str] = lambda s: s,
) -> bool:
    """Add run `run_id`'s lessons (those not remembered already), masked by `redact`;
    drop the oldest sections past `max_bytes`. Returns True if the file changed. Once per
    run: a finalize repeated after a crash finds its section and writes nothing."""
    text = read(ws)
    head, dropped, sections = _sections(text)
    if any(rid == run_id for rid, _ in sections):
        return False
    known = {ln for _, body in sections for ln in body.splitlines() if ln.startswith("- ")}
    new = [f"- {redact(' '.join(lesson.strip().splitlines()))}" for lesson in lessons]
    new = [ln for ln in dict.fromkeys(new) if ln not in known]
    if not new:
        return False
    sections.append((run_id, "\n".join([f"<!-- run: {run_id} -->", f"## {mp_id} ({day})", *new])))
    head = head or TITLE

    def join(dropped: int, kept: list[tuple[str, str]]) -> str:
        marker = [COMPACTION.format(n=dropped, limit=max_bytes)] if dropped else []
        return "\n\n".join([head, *marker, *(body for _, body in kept)]) + "\n"

    out = join(dropped, sections)
    while len(out.encode("utf-8")) > max_bytes and len(sections) > 1:
        sections.pop(0)
        dropped += 1
        out = join(dropped, sections)
    if len(out.encode("utf-8")) > max_bytes:  # one run's lessons alone: keep the first ones that fit
        body = sections[0][1].splitlines()
        while len(body) > 3 and len(join(dropped, [(run_id, "\n".join(body))]).encode("utf-8")) > max_bytes:
            body.pop()
        out = join(dropped, [(run_id, "\n".join(body))])
    atomic_write(path_of(ws), out)
    return True
