"""Text for a person's terminal: what an MP or a remote says never reaches it as an escape
sequence (issue #20)."""

from __future__ import annotations

import re
from typing import Any

# C0 controls but tab and newline, DEL, and C1 (U+0080-U+009F): an MP's title or a step's
# stderr must never reach the operator's terminal as an escape sequence (issue #20).
CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    r"""`text` with every control character shown as `\xNN` (newline and tab kept)."""
    return CONTROL_RE.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def say_error(message: str) -> None:
    """An error line for the operator's terminal: it may quote an MP or a remote, so its
    control characters are escaped (issue #20)."""
    import click

    click.echo(escape_controls(message), err=True)


def terminal_safe(obj: Any) -> Any:
    """A copy of a report (dicts, lists, strings) with `escape_controls` applied to every
    string: for the human renderings; `--json` output escapes them itself."""
    if isinstance(obj, str):
        return escape_controls(obj)
    if isinstance(obj, dict):
        return {k: terminal_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [terminal_safe(v) for v in obj]
    return obj
