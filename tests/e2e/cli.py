"""Run the installed `mp-engine` command as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# The console script pip installed beside this interpreter (what a user types); the same
# code as `python -m mp_engine`.
MP_ENGINE = str(Path(sys.executable).with_name("mp-engine"))


def mpe(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`mp-engine ARGS`, output captured (off a TTY: plain text, JSON log lines)."""
    return subprocess.run(
        [MP_ENGINE, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=timeout
    )
