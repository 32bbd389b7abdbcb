"""The learnings file: what each iteration tried and what the checks said, fed into the
next prompt (phuc-loop's AGENTS.md pattern).

One entry per iteration, appended. When the file grows past `[agent] learnings_max_bytes`
it is compacted: the latest entries stay whole, older ones shrink to their one-line
heading under a `[COMPACTION]` marker that says what was done. Appending the entry of an
iteration that is being retried (after a crash) replaces the earlier attempt's entry.
"""

from __future__ import annotations

import re
from pathlib import Path

from mp_engine.core.atomic import append_durable, atomic_write

ENTRY = "<!-- entry: {key} -->"
ENTRY_RE = re.compile(r"^<!-- entry: (\S+) -->$", re.M)
COMPACTED_HEADING = "## Compacted earlier iterations"
KEEP_WHOLE = 3
MAX_COMPACTED_LINES = 60


def read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def _split(text: str) -> tuple[str, list[str], list[tuple[str, str]]]:
    """(title part, compacted one-liners, [(key, entry text)])."""
    matches = list(ENTRY_RE.finditer(text))
    head = text[: matches[0].start()] if matches else text
    entries = []
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        entries.append((m.group(1), text[m.end() : end].strip("\n")))
    title, _, compacted_part = head.partition(COMPACTED_HEADING)
    compacted = [ln for ln in compacted_part.splitlines() if ln.startswith("- ")]
    return title.rstrip("\n"), compacted, entries


def _join(title: str, compacted: list[str], marker: str | None, entries: list[tuple[str, str]]) -> str:
    parts = [title]
    if compacted:
        parts.append("\n".join([COMPACTED_HEADING, "", *([marker] if marker else []), *compacted]))
    parts += [f"{ENTRY.format(key=k)}\n{body}" for k, body in entries]
    return "\n\n".join(p for p in parts if p) + "\n"


def compact(text: str) -> str:
    """Keep the last entries whole; older entries become their heading line."""
    title, compacted, entries = _split(text)
    old, recent = entries[:-KEEP_WHOLE], entries[-KEEP_WHOLE:]
    if not old:
        return text
    before = text.count("\n")
    compacted = compacted + ["- " + body.splitlines()[0].lstrip("# ").strip() for _k, body in old]
    dropped = max(0, len(compacted) - MAX_COMPACTED_LINES)
    compacted = compacted[dropped:]
    draft = _join(title, compacted, "<!-- [COMPACTION] -->", recent)
    marker = (
        f"<!-- [COMPACTION] {len(old)} older entries ({old[0][0]} .. {old[-1][0]}) distilled to one line each"
        + (f", {dropped} oldest lines dropped" if dropped else "")
        + f"; {before} lines -> {draft.count(chr(10))} lines -->"
    )
    return _join(title, compacted, marker, recent)


def without_title(text: str) -> str:
    """The file (or a part of it) without its title: its compacted lines and entries only,
    so a prompt before the file exists and one after read the same (issue #34)."""
    m = ENTRY_RE.search(text)
    starts = [i for i in (m.start() if m else -1, text.find(COMPACTED_HEADING)) if i >= 0]
    return text[min(starts) :].strip() if starts else ""


def split(text: str, mt_id: str) -> tuple[str, str]:
    """(what came before `mt_id`'s first entry, its entries on): the prompt shows the two
    apart, so the earlier part stays in a prefix cache while this micro-task's grows."""
    first = next((m for m in ENTRY_RE.finditer(text) if m.group(1).startswith(f"{mt_id}_iter-")), None)
    if first is None:
        return text, ""
    return text[: first.start()], text[first.start() :]


def append(path: Path, key: str, entry: str, *, title: str, max_bytes: int) -> bool:
    """Append `entry` under `key` (replacing an entry with the same key); compact when the
    file exceeds `max_bytes`. Returns True if it compacted."""
    text = read(path)
    # The common case, a new entry on a file that ends with one newline, is an append (no
    # rewrite of the whole file per iteration); the bytes are those a rewrite would leave.
    appendable = text.endswith("\n") and not text.endswith("\n\n")
    if not text:
        text = title.rstrip("\n") + "\n"
    existing = re.search(rf"^{re.escape(ENTRY.format(key=key))}$", text, re.M)
    if existing:  # a retried iteration: its earlier attempt's entry is the last one
        text = text[: existing.start()]
    block = "\n" + ENTRY.format(key=key) + "\n" + entry.strip("\n") + "\n"
    text = text.rstrip("\n") + "\n" + block
    if len(text.encode("utf-8")) > max_bytes:
        new = compact(text)
        atomic_write(path, new, durable=False)
        return new != text
    if appendable and not existing:
        append_durable(path, block, durable=False)
    else:
        atomic_write(path, text, durable=False)
    return False
