"""The Makefile's targets as a newcomer runs them (README.md, Quick start)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mp_engine.core.workspace import Workspace
from tests.conftest import REPO_ROOT, read_state, wait_for

VENV = Path(sys.executable).parent.parent


def make(cwd: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`make ARGS` in `cwd` with this repository's Makefile and the venv running the tests
    (`-o`: never set it up again)."""
    stamp = VENV / ".installed-stamp"
    argv = ["make", "-f", str(REPO_ROOT / "Makefile"), f"VENV={VENV}", "-o", str(stamp), *args]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(autouse=True)
def _make_installed():
    if shutil.which("make") is None:
        pytest.skip("make is not installed")


def test_a_second_make_run_ends_with_the_engine_s_message_only(ws, daemon_factory):
    # issue #44: make added "make: *** [Makefile:14: run] Error 4" under the engine's own message.
    (ws.root / "pyproject.toml").touch()
    os.utime(ws.root / "pyproject.toml", (0, 0))  # older than the venv's stamp
    d = daemon_factory(ws.root).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what=lambda: f"ONLINE; log:\n{d.output()}")
    second = make(ws.root, "run", "DASHBOARD=")
    assert second.returncode == 0, second
    assert "daemon already runs" in second.stderr and f"pid {d.proc.pid}" in second.stderr, second.stderr
    assert "Error" not in second.stderr and "***" not in second.stderr, second.stderr
    d.signal(signal.SIGTERM)
    assert d.wait() == 0


def test_the_suite_beside_a_daemon_on_its_checkout_stops_at_once_and_says_why(tmp_path, daemon_factory):
    # issue #44: `make test` beside `make run` ended with 7 errors blaming tests for the
    # daemon's writes. A checkout of its own: a workspace with this suite's conftest.
    checkout = tmp_path / "checkout"
    subprocess.run([sys.executable, "-m", "mp_engine", "init", str(checkout)], check=True, capture_output=True)
    (checkout / "tests").mkdir()
    for name in ("__init__.py", "conftest.py"):
        shutil.copy(REPO_ROOT / "tests" / name, checkout / "tests" / name)
    (checkout / "tests" / "test_probe.py").write_text("def test_probe():\n    pass\n")
    suite = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_probe.py"]
    alone = subprocess.run(suite, cwd=checkout, capture_output=True, text=True, timeout=120)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    d = daemon_factory(checkout).start()
    wait_for(lambda: read_state(Workspace.at(checkout))["status"] == "ONLINE", what=lambda: d.output())
    beside = subprocess.run(suite, cwd=checkout, capture_output=True, text=True, timeout=120)
    said = beside.stdout + beside.stderr
    assert beside.returncode == 2 and "1 passed" not in said, said
    assert f"an mp-engine daemon (pid {d.proc.pid}," in said and f"`kill {d.proc.pid}`" in said, said
    d.signal(signal.SIGTERM)
    assert d.wait() == 0
