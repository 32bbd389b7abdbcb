"""The one exit-code table, the README that documents it, and the CLI boundary that maps
errors to it."""

from __future__ import annotations

import re

from mp_engine.cli.main import main
from mp_engine.core.exitcodes import ExitCode
from tests.conftest import REPO_ROOT


def test_the_codes_are_zero_to_nine_and_the_readme_names_each():
    assert [int(c) for c in ExitCode] == list(range(10))
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("Exit codes:") :]
    for code in (1, 2, 3, 4, 5, 9):
        assert re.search(rf"\b{code} ", section), code
    assert "6 the engine is halted and the MP does not approve it, 7 timeout, 8 git failed" in readme


def test_errors_map_to_their_codes_at_the_boundary(ws, tmp_path, capsys, monkeypatch):
    assert main(["status", "--root", str(tmp_path / "nowhere")]) == ExitCode.USAGE  # WorkspaceError
    ws.state_file.write_text("{")
    assert main(["status", "--root", str(ws.root)]) == ExitCode.USAGE  # StateError
    assert "not valid JSON" in capsys.readouterr().err
    assert main(["--version"]) == ExitCode.OK


def test_check_of_an_invalid_mp_is_1_and_of_a_missing_file_is_2(tmp_path, capsys):
    bad = tmp_path / "bad.md"
    bad.write_text("no header\n")
    assert main(["check", str(bad)]) == ExitCode.MP_ERROR
    assert main(["check", str(tmp_path / "missing.md")]) == ExitCode.USAGE
