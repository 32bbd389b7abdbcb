"""`mp-engine check`: stdout for the structure, stderr and exit 1 for the problem."""

from __future__ import annotations

import json

from tests.conftest import REPO_ROOT
from tests.e2e.cli import mpe


def test_the_shipped_example_is_valid_and_json_parses():
    r = mpe("check", str(REPO_ROOT / "examples" / "hello.md"), "--json")
    assert r.returncode == 0 and r.stderr == ""
    data = json.loads(r.stdout)
    assert data["mp_id"].startswith("MP-") and data["steps"]


def test_an_invalid_mp_says_where_and_how_to_fix_it_on_stderr(tmp_path):
    f = tmp_path / "mp.md"
    f.write_text("# MP-1.0\nTimeout: soon\n\n```bash\ntrue\n```\n")
    r = mpe("check", str(f))
    assert r.returncode == 1 and r.stdout == ""
    first, second = r.stderr.splitlines()[:2]
    assert first.endswith("(line 2)") and "`Timeout: soon` is invalid" in first
    assert second.startswith("fix: Set `Timeout:` to")


def test_a_missing_file_is_a_usage_error(tmp_path):
    r = mpe("check", str(tmp_path / "nope.md"))
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_control_characters_from_the_mp_reach_the_terminal_escaped(tmp_path):
    """An MP's title, step lines and its error quote what the MP holds: an OSC sequence
    that would retitle the terminal, a clear-screen, a C1 CSI, a bell (issue #20)."""
    f = tmp_path / "mp.md"
    nasty = "\x1b]0;owned\x07\x1b[2J\u009b31m\b"
    f.write_text(f"# MP-1.0 Title {nasty}\n\n```bash\necho {nasty}\n```\n")
    r = mpe("check", str(f))
    assert r.returncode == 0 and r.stdout.count("\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\x08") == 2
    assert not any(c in r.stdout for c in "\x1b\x07\b\u009b")
    f.write_text(f"# MP-1.0 Title\nTimeout: {nasty}\n\n```bash\ntrue\n```\n")
    r = mpe("check", str(f))
    assert r.returncode == 1 and "\\x1b]0;owned" in r.stderr and not any(c in r.stderr for c in "\x1b\x07\b\u009b")
