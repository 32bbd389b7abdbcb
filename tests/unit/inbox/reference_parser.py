"""The MP body parser as it was before issue #20, line by line: the oracle the fuzz test
compares the linear parser with. Kept deliberately plain; it is slow on big input."""

from __future__ import annotations

from mp_engine.core.errors import InvalidMPError
from mp_engine.inbox.header import decode, is_header_key, parse_header_line, parse_headers
from mp_engine.inbox.lines import fence_open, heading, key_line
from mp_engine.inbox.mpfile import COMMAND_LANGS, FILE_LANG, VALIDATE_TITLES, Block


def reference_parse(data: bytes) -> dict:
    """steps, checks, body (line number, text) and notes, or raise InvalidMPError."""
    text = decode(data, max_bytes=1 << 24)
    lines = text.split("\n")
    head_idx, mp_id, _title = parse_header_line(lines)
    _headers, i = parse_headers(lines, head_idx + 1, mp_id)
    steps: list[Block] = []
    checks: list[Block] = []
    body: list[tuple[int, str]] = []
    notes: list[str] = []
    validate_level: int | None = None
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
            if validate_level is None:
                body.append((i + 1, line))
            i += 1
            continue
        indent = fence.indent
        body_lines = []
        j = i + 1
        while j < len(lines) and not fence.closes(lines[j]):
            body_lines.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip(" \t"))
            j += 1
        if j >= len(lines):
            raise InvalidMPError(f"the code block opened at line {i + 1} is never closed", "", line=i + 1)
        block_body = "\n".join(body_lines)
        words = fence.info.split(None, 1)
        lang = words[0].lower() if words else ""
        in_validate = validate_level is not None
        if not in_validate:
            body.extend((k + 1, lines[k]) for k in range(i, j + 1))
        if lang in COMMAND_LANGS:
            seq = checks if in_validate else steps
            kind = "check" if in_validate else "command"
            seq.append(Block(kind=kind, index=len(seq) + 1, line=i + 1, body=block_body, lang=COMMAND_LANGS[lang]))
        elif lang == FILE_LANG:
            path = words[1].strip() if len(words) > 1 else ""
            if not path:
                raise InvalidMPError("a ```file block has no path", "", line=i + 1)
            if in_validate:
                raise InvalidMPError("a ```file block sits inside the Validate section", "", line=i + 1)
            content = block_body + "\n" if body_lines else ""
            steps.append(Block(kind="file", index=len(steps) + 1, line=i + 1, body=content, path=path))
        elif lang:
            notes.append(
                f"line {i + 1}: a ```{lang} block is not executed (only ```bash, ```sh, ```python and ```file are)"
            )
        i = j + 1
    return {"steps": steps, "checks": checks, "body": body, "notes": notes}
