"""Diagnoses of failed steps and checks: root-cause class, a sentence, exactly one fix.

MP-1.3 asks for a diagnosis and exactly one proposed fix on every error. The classifier
looks at what is known for certain first (timeout, signal, exit code 126/127) and then
at the error output, most specific pattern first.
"""

from __future__ import annotations

import re
import signal as _signal

from mp_engine.execute.errtrap import FailedAt
from mp_engine.record.diagnosis import Diagnosis

_NOT_FOUND = [
    re.compile(r"(?:^|\n)(?:[^\n:]*: )?(?:line \d+: )?([^\s:]+): command not found"),
    re.compile(r"(?:^|\n)[^\n:]*: \d+: ([^\s:]+): not found"),
]
_PERMISSION = re.compile(r"([^\s:]+): Permission denied")
_NO_SUCH_FILE = re.compile(r"([^\s:'\"]+)'?:? No such file or directory")
_SYNTAX = re.compile(r"syntax error|unexpected end of file|unexpected EOF", re.I)
_SUDO = re.compile(r"sudo: (?:a terminal is required|a password is required|no tty present)", re.I)
_TTY = re.compile(r"/dev/tty: No such device or address|could not open /dev/tty|/dev/tty: .*not a tty", re.I)
_READ = re.compile(r"read(?:\s|$)")
_DISK_FULL = re.compile(r"No space left on device|Disk quota exceeded", re.I)
_NETWORK = re.compile(
    r"Could not resolve host|Temporary failure in name resolution|Name or service not known|"
    r"Connection refused|Connection timed out|Network is unreachable|No route to host",
    re.I,
)


def classify_process(
    *,
    label: str,  # "step" or "check"
    number: int,
    step_id: str,
    line: int | None,  # the block's opening fence in the MP
    command: str,
    exit_code: int | None,
    signal: int | None,
    timed_out: bool,
    timeout: float,
    timeout_source: str,  # "Step-Timeout" or "Timeout"
    stderr: str,
    stdout: str,
    mp_id: str,
    failed_at: FailedAt | None = None,  # the ERR trap's record (bash steps; errtrap.py)
) -> Diagnosis:
    """Classify a command step or check that did not succeed. With the ERR trap's record
    the diagnosis quotes the command that failed and its line; without it, the block's
    first line."""
    where = f"{label} {number}"
    first = next((ln.strip() for ln in command.splitlines() if ln.strip()), command)[:80]
    if failed_at is not None:
        culprit, at = failed_at.command, f"`{failed_at.command}` (line {failed_at.line} of {where})"
        mp_line = line + failed_at.line if line is not None else None
    else:
        culprit, at, mp_line = first, f"{where} (`{first}`)", line
    subject = at[0].upper() + at[1:]  # `at` at the start of a sentence
    text = stderr + "\n" + stdout
    resend = f"then resend the MP with `Approves: {mp_id}`"

    def d(kind: str, summary: str, diagnosis: str, fix: str) -> Diagnosis:
        return Diagnosis(kind, summary, diagnosis, fix, step_id, mp_line)

    if timed_out:
        if timeout_source == "Timeout":
            return d(
                "timeout",
                f"MP timeout in {where}",
                f"The MP's total time budget ran out during {where} (`{first}`); its whole process group was stopped.",
                f"Raise the budget with a `Timeout: {int(timeout * 2) or 1}` line under the MP title, {resend}.",
            )
        return d(
            "timeout",
            f"timeout in {where}",
            f"{where.capitalize()} (`{first}`) was still running after {timeout:g} s, so its whole process group was stopped.",
            f"Give the step more time with a `Step-Timeout: {int(timeout * 2) or 1}` line under the MP title, {resend}.",
        )
    if signal is not None:
        name = _signal_name(signal)
        hint = " (SIGKILL from outside usually means the out-of-memory killer)" if signal == _signal.SIGKILL else ""
        return d(
            "killed",
            f"{where} killed by {name}",
            f"{where.capitalize()} (`{first}`) was killed by {name}{hint}.",
            f"Check the engine host's kernel log (`dmesg`) for who sent {name}, {resend}.",
        )
    if _SUDO.search(text):
        return d(
            "sudo_password",
            f"sudo asked for a password in {where}",
            f"{subject} ran sudo, which asked for a password; steps have no terminal to type it in.",
            f"Allow that command without a password for the engine's user (a NOPASSWD line in sudoers), {resend}.",
        )
    if _TTY.search(text) or (failed_at is not None and "/dev/tty" in failed_at.command):
        return d(
            "needs_terminal",
            f"terminal needed in {where}",
            f"{subject} needs a terminal (/dev/tty), and steps run without one.",
            f"Run `{culprit}` in its non-interactive form (a `--yes`/`--batch` option, or the answer as an argument), {resend}.",
        )
    if failed_at is not None and exit_code == 1 and _READ.match(failed_at.command):
        return d(
            "reads_stdin",
            f"read from stdin in {where}",
            f"{subject} reads standard input, which is empty for steps (/dev/null), so it failed at end of input.",
            f"Put the value in the step instead of reading it (e.g. `name=value` in place of `{culprit}`), {resend}.",
        )
    if exit_code == 128 + _signal.SIGPIPE:
        pipeline = f"`{failed_at.source_line}` (line {failed_at.line} of {where})" if failed_at else at
        return d(
            "sigpipe",
            f"SIGPIPE in {where}",
            f"A pipeline in {pipeline} exited 141: a command was killed by SIGPIPE because the reader after it exited first "
            f"(as in `yes | head`); `-o pipefail` makes that fail the step.",
            f"If the reader stopping early is intended, end that pipeline with `|| [ $? -eq 141 ]`, {resend}.",
        )
    m = next((found for pattern in _NOT_FOUND if (found := pattern.search(text))), None)
    if m or exit_code == 127:
        cmd = m.group(1) if m else culprit.split()[0]
        return d(
            "command_not_found",
            f"command not found in {where}",
            f"{where.capitalize()} called `{cmd}`, which is not installed or not on the engine's PATH (exit code {exit_code}).",
            f"Install `{cmd}` on the engine host so that it is on the daemon's PATH, {resend}.",
        )
    m = _PERMISSION.search(text)
    if m or exit_code == 126:
        path = m.group(1) if m else culprit.split()[0]
        return d(
            "permission_denied",
            f"permission denied in {where}",
            f"{where.capitalize()} was refused access to `{path}` (exit code {exit_code}).",
            f"Make `{path}` accessible to the engine's user (e.g. `chmod +x {path}` for a script) in an earlier step, {resend}.",
        )
    if exit_code is not None and 128 < exit_code < 128 + 65 and exit_code != 128 + _signal.SIGPIPE:
        name = _signal_name(exit_code - 128)
        return d(
            "killed",
            f"{where}: a command was killed by {name}",
            f"{subject} was killed by {name} (exit code {exit_code} = 128 + {exit_code - 128}).",
            f"Find who sent {name} to `{culprit}` (for SIGKILL, the kernel log: `dmesg`), {resend}.",
        )
    if _DISK_FULL.search(text):
        return d(
            "disk_full",
            f"disk full in {where}",
            f"{where.capitalize()} failed because the disk (or quota) is full.",
            "Free space on the engine host's workspace filesystem, then send an MP that repeats the step.",
        )
    if _NETWORK.search(text):
        return d(
            "network",
            f"network error in {where}",
            f"{where.capitalize()} could not reach a network host: {_first_match_line(text, _NETWORK)}",
            f"Check that the engine host can reach that host, {resend}.",
        )
    if _SYNTAX.search(text):
        return d(
            "syntax_error",
            f"shell syntax error in {where}",
            f"The shell could not parse {where}: {_first_match_line(text, _SYNTAX)}",
            f"Correct the shell syntax of {where} (unbalanced quotes, `if` without `fi`, ...), {resend}.",
        )
    m = _NO_SUCH_FILE.search(text)
    if m:
        return d(
            "missing_file",
            f"missing file in {where}",
            f"{where.capitalize()} needs `{m.group(1)}`, which does not exist (steps run in the workspace root).",
            f"Create `{m.group(1)}` before {where} runs (or correct the path), {resend}.",
        )
    if label == "check":
        return d(
            "validation_failed",
            f"check {number} failed",
            f"The steps ran, but validation check {number} failed: {at} exited with code {exit_code}.",
            f"Correct the steps so that check {number} passes, {resend}.",
        )
    return d(
        "nonzero_exit",
        f"exit {exit_code} in {where}",
        f"{subject} exited with code {exit_code}; see the error output.",
        f"Correct `{culprit}` in {where} according to the error output, {resend}.",
    )


def _signal_name(number: int) -> str:
    try:
        return _signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _first_match_line(text: str, pattern: re.Pattern[str]) -> str:
    for line in text.splitlines():
        if pattern.search(line):
            return line.strip()[:200]
    return ""


def file_refused(step_id: str, number: int, line: int, path: str, reason: str, mp_id: str) -> Diagnosis:
    return Diagnosis(
        "file_refused",
        f"file refused in step {number}",
        f"Step {number} asked to write `{path}`, which was refused: {reason}.",
        f"Use a path relative to the workspace root that stays inside it (e.g. `src/{path.rsplit('/', 1)[-1] or 'file.txt'}`) "
        f"and send the corrected MP with `Approves: {mp_id}`.",
        step_id,
        line,
    )


def file_write_failed(step_id: str, number: int, line: int, path: str, error: str, mp_id: str) -> Diagnosis:
    return Diagnosis(
        "file_write_failed",
        f"could not write file in step {number}",
        f"Step {number} could not write `{path}`: {error}.",
        f"Make the parent directory of `{path}` writable by the engine's user, then resend with `Approves: {mp_id}`.",
        step_id,
        line,
    )


def start_failed(step_id: str, label: str, number: int, line: int, error: str, mp_id: str) -> Diagnosis:
    return Diagnosis(
        "command_not_found",
        f"could not start {label} {number}",
        f"The interpreter for {label} {number} could not be started: {error}.",
        f"Install the interpreter on the engine host or set `[execution] shell`, then resend with `Approves: {mp_id}`.",
        step_id,
        line,
    )


def interrupted(step_id: str, label: str, number: int, mp_id: str) -> Diagnosis:
    return Diagnosis(
        "interrupted",
        f"engine stopped during {label} {number}",
        f"The engine died or was force-stopped while {label} {number} was running, so it may have run only partly; "
        f'`[recovery] interrupted_step = "report"` says not to run it again.',
        f"Check the workspace for partial effects of {label} {number}, then send an MP that redoes it with `Approves: {mp_id}`.",
        step_id,
        None,
    )


def mp_timeout_before(step_id: str, label: str, number: int, timeout: float, mp_id: str) -> Diagnosis:
    return Diagnosis(
        "timeout",
        f"MP timeout before {label} {number}",
        f"The MP's {timeout:g} s budget was used up before {label} {number} could start.",
        f"Raise the budget with a `Timeout: {int(timeout * 2) or 1}` line under the MP title and resend with `Approves: {mp_id}`.",
        step_id,
        None,
    )
