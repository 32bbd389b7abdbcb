"""The real agent CLIs, installed from their registries at pinned versions and cached.

    claude   npm @anthropic-ai/claude-code   (a native binary, about 240 MB)

Each goes into its own npm prefix under `$MP_ENGINE_CONFORMANCE_CACHE` (default: the
project-local `.cache/conformance/`, git-ignored), named by CLI and version, so it is
installed once and kept between runs.
To run the suite against another version: `MP_ENGINE_CONFORMANCE_CLAUDE=2.1.200 make test`
(or `.venv/bin/python -m pytest tests/conformance`); the pins below are the versions the
suite passed on, which `docs/AGENT.md` names.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

PINNED = {"claude": ("@anthropic-ai/claude-code", "2.1.197", "bin/claude.exe")}


REPO_ROOT = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    return Path(os.environ.get("MP_ENGINE_CONFORMANCE_CACHE") or REPO_ROOT / ".cache" / "conformance")


def version(cli: str) -> str:
    return os.environ.get(f"MP_ENGINE_CONFORMANCE_{cli.upper()}") or PINNED[cli][1]


def installed(cli: str) -> Path:
    """The CLI's executable, installed from npm into the cache when missing; the test is
    skipped (with the reason) where npm or the registry is not available."""
    package, _, binary = PINNED[cli]
    wanted = version(cli)
    prefix = cache_dir() / f"{cli}-{wanted}"
    exe = prefix / "node_modules" / package / binary
    if exe.is_file() and os.access(exe, os.X_OK) and exe.stat().st_size > 1_000_000:
        return exe
    if shutil.which("npm") is None:
        pytest.skip(f"npm is not installed, so the real {cli} CLI cannot be installed")
    prefix.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [
            "npm",
            "install",
            "--prefix",
            str(prefix),
            "--no-audit",
            "--no-fund",
            "--foreground-scripts",
            f"{package}@{wanted}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        pytest.skip(f"npm could not install {package}@{wanted}: {proc.stderr.strip()[-500:]}")
    if not exe.is_file() or exe.stat().st_size < 1_000_000:
        pytest.fail(f"{package}@{wanted} installed, but {exe} is not its native binary (postinstall did not run?)")
    return exe
