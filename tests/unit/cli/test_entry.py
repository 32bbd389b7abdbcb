"""The entry point: a plain `status` runs without click, pydantic, structlog or filelock;
anything else goes to the click CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mp_engine.cli.entry import plain_status


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["status"], (Path("."), False)),
        (["status", "--json", "--root", "/w"], (Path("/w"), True)),
        (["status", "--root=/w"], (Path("/w"), False)),
        (["status", "--help"], None),
        (["status", "--remote", "u"], None),
        (["status", "--root"], None),
        (["--log-level", "debug", "status"], None),
        (["once"], None),
        ([], None),
    ],
)
def test_which_calls_take_the_fast_path(args, expected, monkeypatch):
    monkeypatch.delenv("MP_ENGINE_ROOT", raising=False)
    assert plain_status(args) == expected


def test_the_fast_status_imports_none_of_the_heavy_packages(ws):
    code = (
        "import sys\nfrom mp_engine.cli.entry import main\nrc = main(['status', '--json', '--root', sys.argv[1]])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('click', 'pydantic', 'structlog', 'filelock', 'git', 'watchdog'))\n"
        "print(heavy, file=sys.stderr)\nsys.exit(rc)\n"
    )
    # The first call validates the configuration (pydantic) and caches it; the second must not.
    subprocess.run([sys.executable, "-c", code, str(ws.root)], capture_output=True, check=True)
    out = subprocess.run([sys.executable, "-c", code, str(ws.root)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stderr.strip() == "[]", out.stderr
    assert json.loads(out.stdout)["state"]["status"] == "OFFLINE"


def test_a_fast_status_of_a_directory_that_is_no_workspace_exits_2(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "mp_engine", "status", "--root", str(tmp_path)], capture_output=True, text=True
    )
    assert out.returncode == 2 and "mp-engine init" in out.stderr and out.stdout == ""
