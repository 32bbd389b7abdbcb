"""The ERR trap: real bash tells which command of a step failed and on which line, and
the diagnosis quotes it (issue #15)."""

from __future__ import annotations

import subprocess

import pytest

from mp_engine.execute.errtrap import bash_argv, read_failed_at
from mp_engine.execute.shell import ShellExecutor
from tests.unit.execute.test_shell import context


def run_bash(tmp_path, body: str) -> tuple[int, str, str]:
    script, trap = tmp_path / "s.bash", tmp_path / "s.failed-at"
    script.write_text(body + "\n")
    proc = subprocess.run(bash_argv("bash", script, trap), capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout, proc.stderr


def test_the_trap_names_the_failing_command_and_leaves_the_output_alone(tmp_path):
    rc, out, err = run_bash(tmp_path, "echo before\necho to-err >&2\ntest -f missing\necho never")
    assert (rc, out, err) == (1, "before\n", "to-err\n")
    at = read_failed_at(tmp_path / "s.failed-at", rc, "echo before\necho to-err >&2\ntest -f missing\necho never")
    assert (at.line, at.command, at.source_line) == (3, "test -f missing", "test -f missing")


def test_the_script_keeps_its_own_name_and_its_error_trap(tmp_path):
    rc, out, _ = run_bash(tmp_path, 'echo "$0"\ntrap "echo mine" ERR\nfalse')
    assert rc == 1 and out.splitlines() == [str(tmp_path / "s.bash"), "mine"]


def test_a_record_about_another_exit_is_not_believed(tmp_path):
    body = "set +e\nfalse\necho survived"
    (tmp_path / "s.failed-at").write_text("1\t2\tfalse\n")
    assert read_failed_at(tmp_path / "s.failed-at", 3, body) is None
    assert read_failed_at(tmp_path / "absent", 1, body) is None


def test_an_exit_of_the_block_names_its_line_not_an_earlier_failure(tmp_path):
    # issue #44: `exit 3` fires no ERR trap; the fix quoted the block's first line.
    body = "set +e\nfalse\necho 'about to fail' >&2\nexit 3\necho never"
    rc, out, err = run_bash(tmp_path, body)
    at = read_failed_at(tmp_path / "s.failed-at", rc, body)
    assert (rc, out, err) == (3, "", "about to fail\n")
    assert (at.status, at.line, at.command, at.source_line) == (3, 4, "exit 3", "exit 3")


@pytest.mark.parametrize(
    ("body", "rc", "line", "command"),
    [
        ("echo a\nf() {\n  exit 7\n}\nf", 7, 3, "exit 7"),  # inside a function of the block
        ("false || exit", 1, 1, "exit"),  # a bare exit keeps the status before it
        ("set -u\nif true; then\n  exit 6\nfi", 6, 3, "exit 6"),
    ],
)
def test_an_exit_anywhere_in_the_block_is_found(tmp_path, body, rc, line, command):
    got, _, _ = run_bash(tmp_path, body)
    at = read_failed_at(tmp_path / "s.failed-at", got, body)
    assert got == rc and (at.line, at.command) == (line, command)


def test_an_exit_in_a_file_the_block_sources_is_not_placed_in_the_block(tmp_path):
    (tmp_path / "lib.sh").write_text("echo lib\nexit 5\n")
    body = f"echo a\necho b\n. {tmp_path / 'lib.sh'}"
    rc, out, _ = run_bash(tmp_path, body)
    assert rc == 5 and out == "a\nb\nlib\n"
    assert read_failed_at(tmp_path / "s.failed-at", rc, body) is None


def test_a_script_that_succeeds_or_defines_its_own_exit_is_unchanged(tmp_path):
    assert run_bash(tmp_path, "echo ok\nexit 0")[:2] == (0, "ok\n")
    rc, out, _ = run_bash(tmp_path, 'exit() { echo "mine $1"; builtin exit 9; }\nexit 2')
    assert (rc, out) == (9, "mine 2\n")


def test_a_failure_inside_a_function_or_subshell_is_found(tmp_path):
    body = "f() {\n  grep -q nothing /dev/null\n}\necho a\nf"
    rc, _, _ = run_bash(tmp_path, body)
    at = read_failed_at(tmp_path / "s.failed-at", rc, body)
    assert rc == 1 and (at.line, at.command) == (2, "grep -q nothing /dev/null")


CASES = [
    # (block, kind, words the diagnosis must hold, words the fix must hold)
    ("echo before\ntest -f missing", "nonzero_exit", ["`test -f missing`", "line 2"], ["`test -f missing` (line 2"]),
    (
        'echo "about to fail" >&2\nexit 3',
        "nonzero_exit",
        ["`exit 3` (line 2 of step 1)", "`about to fail`"],
        ["`exit 3` (line 2 of step 1)"],
    ),
    ("echo asking\nread name\necho $name", "reads_stdin", ["`read name`", "line 2", "standard input"], ["read name"]),
    ("echo asking\nread x < /dev/tty", "needs_terminal", ["line 2", "terminal"], ["non-interactive"]),
    ("set -o pipefail\nyes | head -n1 > /dev/null", "sigpipe", ["`yes | head -n1 > /dev/null`", "141"], ["141"]),
    ("echo a\nno-such-tool --flag", "command_not_found", ["`no-such-tool`"], ["Install `no-such-tool`"]),
    ("printf 'x' > f.sh\n./f.sh", "permission_denied", ["`./f.sh`"], ["chmod +x"]),
    ("echo a\nbash -c 'kill -KILL $$'", "killed", ["SIGKILL", "line 2", "137"], ["dmesg"]),
    ("echo a\nbash -c 'kill -TERM $$'", "killed", ["SIGTERM", "143"], ["SIGTERM"]),
]


@pytest.mark.parametrize(("body", "kind", "diagnosis", "fix"), CASES, ids=[c[1] + str(i) for i, c in enumerate(CASES)])
def test_each_failure_is_diagnosed_at_the_command_that_failed(ws, body, kind, diagnosis, fix):
    ctx = context(ws, f"# MP-7.1\n\n```bash\n{body}\n```\n")
    res = ShellExecutor().run(ctx)
    d = res.diagnosis
    assert res.status == "failed" and d.kind == kind, d
    assert all(w in d.diagnosis for w in diagnosis), d.diagnosis
    assert all(w in d.fix for w in fix), d.fix
    assert "Approves: MP-7.1" in d.fix


def test_sudo_asking_for_a_password_is_recognised(ws):
    # sudo is not on this machine's PATH in CI; a step prints what sudo prints without a TTY.
    body = "echo 'sudo: a terminal is required to read the password; either use the -S option' >&2\nexit 1"
    res = ShellExecutor().run(context(ws, f"# MP-7.2\n\n```bash\n{body}\n```\n"))
    assert res.diagnosis.kind == "sudo_password" and "NOPASSWD" in res.diagnosis.fix


def test_the_diagnosis_line_is_the_failing_line_of_the_mp(ws):
    text = "# MP-7.3\n\nWords.\n\n```bash\necho one\necho two\nfalse\n```\n"
    res = ShellExecutor().run(context(ws, text))
    lines = text.split("\n")
    assert lines[res.diagnosis.line - 1] == "false"


def test_sh_blocks_run_without_the_trap(ws):
    res = ShellExecutor().run(context(ws, "# MP-7.4\n\n```sh\necho a\nfalse\n```\n"))
    assert res.diagnosis.kind == "nonzero_exit" and "`echo a`" in res.diagnosis.diagnosis
    assert not list(ws.runs_dir.glob("*/steps/*.failed-at"))
