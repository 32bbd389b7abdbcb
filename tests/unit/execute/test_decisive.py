"""The decisive lines of a failing command, from the real tools' own output: pytest, an npm
test script, make; and the diagnosis of a shell MP that runs one of them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mp_engine.execute.decisive import decisive
from tests.conftest import drop, result_field

SUM_TEST = (
    'def test_ok():\n    assert 1\n\n\ndef test_sum():\n    total = 1 + 1\n    assert total == 3, "the sum is wrong"\n'
)


def output(cmd: list[str], cwd: Path) -> str:
    # Not as a sub-make of `make test` (MAKELEVEL would make it say `make[1]:`): as a user runs it.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode != 0, r.stdout + r.stderr
    return r.stderr + "\n" + r.stdout


def test_a_failing_pytest_gives_its_assertion_and_the_first_failing_test(tmp_path):
    (tmp_path / "test_x.py").write_text(SUM_TEST)
    got = decisive(output([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_x.py"], tmp_path))
    assert "E       assert 2 == 3" in got.lines and any(ln.startswith("FAILED test_x.py::test_sum") for ln in got.lines)
    assert not any("passed" in ln for ln in got.lines)  # the summary line is not the decisive one
    assert "`test_x.py::test_sum`" in got.next_step and "pytest test_x.py::test_sum" in got.next_step


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_a_failing_npm_test_script_gives_the_assertion_and_the_script(tmp_path):
    (tmp_path / "package.json").write_text('{"name": "demo", "version": "1.0.0", "scripts": {"test": "node test.js"}}')
    (tmp_path / "test.js").write_text(
        'const assert = require("assert");\nassert.strictEqual(1 + 1, 3, "the sum is wrong");\n'
    )
    got = decisive(output(["npm", "test"], tmp_path))
    assert any("AssertionError" in ln and "the sum is wrong" in ln for ln in got.lines), got.lines
    assert "npm script `test`" in got.next_step


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_a_failing_make_gives_the_recipes_error_and_its_target(tmp_path):
    (tmp_path / "Makefile").write_text(
        "all: build\n\nbuild:\n\t@echo compiling\n\t@sh -c 'echo \"error: the build broke\" >&2; exit 3'\n"
    )
    got = decisive(output(["make"], tmp_path))
    assert got.lines[-2:] == ["error: the build broke", "make: *** [Makefile:5: build] Error 3"], got.lines
    assert "`build` (Makefile line 5)" in got.next_step and "exited 3" in got.next_step


def test_without_error_lines_the_last_lines_are_quoted():
    got = decisive("step one\nstep two\nstep three\nstep four\n")
    assert got.lines == ["step two", "step three", "step four"] and got.next_step is None


def test_a_shell_mp_running_a_failing_pytest_says_which_test_and_why(ws, monkeypatch):
    from mp_engine.config.load import load_config
    from mp_engine.pipeline.engine import Engine

    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    engine = Engine(ws, load_config(ws.root))
    engine.start(daemon=False)
    (ws.root / "test_x.py").write_text(SUM_TEST)
    drop(ws, f"# MP-9.1 Tests\n\n```bash\n{sys.executable} -m pytest -q -p no:cacheprovider test_x.py\n```\n")
    engine.tick()
    text = ws.result_file.read_text()
    assert result_field(ws, "Status") == "ERROR"
    assert "`E       assert 2 == 3`" in text and "make the first failing test pass: `test_x.py::test_sum`" in text
