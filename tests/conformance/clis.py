"""The real agent CLIs, installed from their registries at pinned versions and cached.

    claude   npm   @anthropic-ai/claude-code   (a native binary, about 240 MB)
    codex    npm   @openai/codex               (a native binary, about 400 MB)
    aider    PyPI  aider-chat                  (its own virtualenv, about 45 s to install)

Each goes into its own npm prefix or virtualenv under `$MP_ENGINE_CONFORMANCE_CACHE`
(default: the project-local `.cache/conformance/`, git-ignored), named by CLI and version,
so it is installed once and kept between runs.
To run the suite against another version: `MP_ENGINE_CONFORMANCE_CODEX=0.170.0 make test`
(or `.venv/bin/python -m pytest tests/conformance`); the pins below are the versions the
suite passed on, which `docs/AGENT.md` and `agent/call/presets.CONFORMANCE` name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock

from mp_engine.agent.call.presets import codex_temp

# cli: (registry, package, version, the executable and a file that is large only when the
# native binary really came (npm runs claude's postinstall), both under `node_modules/`
# for npm and the virtualenv for PyPI)
PINNED = {
    "claude": (
        "npm",
        "@anthropic-ai/claude-code",
        "2.1.197",
        "@anthropic-ai/claude-code/bin/claude.exe",
        "@anthropic-ai/claude-code/bin/claude.exe",
    ),
    "codex": ("npm", "@openai/codex", "0.169.0", ".bin/codex", "@openai/codex-*/vendor/*/bin/codex"),
    "aider": ("pypi", "aider-chat", "0.86.2", "bin/aider", "bin/aider"),
}


REPO_ROOT = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    return Path(os.environ.get("MP_ENGINE_CONFORMANCE_CACHE") or REPO_ROOT / ".cache" / "conformance")


@contextlib.contextmanager
def codex_home() -> Iterator[Path]:
    """A fresh CODEX_HOME outside any temporary directory: with a system `bwrap` on PATH,
    codex 0.169 runs commands through its `codex-linux-sandbox` helper, which it refuses to
    alias under /tmp ("Refusing to create helper binaries under temporary dir"), and every
    command of the call then fails. The conformance rows run with a system bwrap present."""
    root = cache_dir() / "codex-homes"
    if codex_temp(root) is not None:  # a cache under /tmp (a checkout there): /var/tmp is not "temp"
        root = Path("/var/tmp") / f"mp-engine-codex-homes-{os.getuid()}"
    root.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(dir=root))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def version(cli: str) -> str:
    return os.environ.get(f"MP_ENGINE_CONFORMANCE_{cli.upper()}") or PINNED[cli][2]


def installed(cli: str) -> Path:
    """The CLI's executable, installed into the cache when missing; the test is skipped
    (with the reason) where npm or the registry is not available."""
    registry, package, _, binary, marker = PINNED[cli]
    wanted = version(cli)
    prefix = cache_dir() / f"{cli}-{wanted}"
    home = prefix / "node_modules" if registry == "npm" else prefix
    exe = home / binary
    if _ready(home, exe, marker, registry):
        return exe
    cache_dir().mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache_dir() / f"{cli}-{wanted}.lock")):  # test workers (pytest -n) install once
        if not _ready(home, exe, marker, registry):
            _install_into(cli, registry, package, wanted, prefix)
    if not _ready(home, exe, marker, registry):
        pytest.fail(f"{package}@{wanted} installed, but {exe} is not its executable (postinstall did not run?)")
    return exe


def _install_into(cli: str, registry: str, package: str, wanted: str, prefix: Path) -> None:
    if registry == "npm":
        if shutil.which("npm") is None:
            pytest.skip(f"npm is not installed, so the real {cli} CLI cannot be installed")
        prefix.mkdir(parents=True, exist_ok=True)
        cmd = ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--foreground-scripts"]
        _install(cli, [*cmd, f"{package}@{wanted}"])
    else:
        _install(cli, [sys.executable, "-m", "venv", "--clear", str(prefix)])
        _install(
            cli, [str(prefix / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", f"{package}=={wanted}"]
        )


def _ready(home: Path, exe: Path, marker: str, registry: str) -> bool:
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        return False
    if registry != "npm":
        return True
    found = sorted(home.glob(marker)) if "*" in marker else [home / marker]
    return any(p.is_file() and p.stat().st_size > 1_000_000 for p in found)


def _install(cli: str, cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        pytest.skip(f"could not install the real {cli} CLI ({' '.join(cmd[:3])}): {proc.stderr.strip()[-500:]}")
