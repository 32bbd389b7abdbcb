"""One module per subcommand; cli.py wires them to click. Each returns an `ExitCode`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mp_engine.workspace import Workspace

if TYPE_CHECKING:
    from mp_engine.config import Config

# The configuration is imported where it is loaded, not here: `status` reads it from the
# validated cache (config_cache.py) and must not pay for pydantic (bench figure 8).


def load(root: Path) -> tuple[Workspace, Config]:
    """The workspace at `root` and its configuration, both checked completely."""
    from mp_engine.config import load_config

    ws = Workspace.at(root)
    ws.check()
    return ws, load_config(ws.root)


def load_for_reading(root: Path) -> tuple[Workspace, Config, str | None]:
    """For read-only commands (`logs`): a configuration error must not blind the
    operator, so the defaults stand in and the error comes back as a warning to show."""
    from mp_engine.config import Config
    from mp_engine.config_cache import read

    ws = Workspace.at(root)
    ws.check()
    data, error = read(ws.root, ws.local_dir)
    return ws, Config.model_validate(data), error


# C0 controls but tab and newline, DEL, and C1 (U+0080-U+009F): an MP's title or a step's
# stderr must never reach the operator's terminal as an escape sequence (issue #20).
CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def taken(request: Path, timeout: float, poll: float = 0.05) -> bool:
    """Wait until the engine has taken (removed) a request file this host wrote for it
    (`cancel`, `answer`): True when it did within `timeout` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while request.exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)
    return True


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
