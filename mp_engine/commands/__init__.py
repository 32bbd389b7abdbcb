"""The engine host's commands, one module per subcommand; cli/ wires them to click. Each
returns an `ExitCode`. (The orchestrator's side is client/; the dashboard is web/.)"""

from __future__ import annotations

from pathlib import Path


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
