"""`mp-engine service install --dry-run` prints a unit that runs this very installation."""

from __future__ import annotations

import sys

from tests.e2e.cli import mpe


def test_dry_run_prints_the_unit_and_the_commands_and_writes_nothing(ws, hermetic_env):
    r = mpe("service", "install", "--user", "--systemd", "--dry-run", "--root", str(ws.root))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("# ") and "--dry-run: not written" in r.stdout.splitlines()[0]
    assert f"ExecStart={sys.executable} -m mp_engine run --root {ws.root}" in r.stdout
    assert "systemctl --user enable --now" in r.stdout
    assert not (hermetic_env / ".config" / "systemd").exists()
