"""Diagnoses of failed steps and checks: root-cause class, a sentence, exactly one fix.

MP-1.3 asks for a diagnosis and exactly one proposed fix on every error. The classifier
is an ordered table of rules (`RULES`) over one `Failure`: what is known for certain first
(timeout, signal, exit code 126/127), then the error output, most specific pattern first.
"""

from __future__ import annotations

import re
import signal as _signal
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from mp_engine.execute.decisive import Decisive, decisive
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


@dataclass(frozen=True)
class Failure:
    """A command step or check that did not succeed, as the rules read it."""

    label: str  # "step" or "check"
    number: int
    step_id: str
    line: int | None  # the block's opening fence in the MP
    command: str
    exit_code: int | None
    signal: int | None
    timed_out: bool
    timeout: float
    timeout_source: str  # "Step-Timeout" or "Timeout"
    stderr: str
    stdout: str
    mp_id: str
    failed_at: FailedAt | None = None  # the ERR trap's record (bash steps; errtrap.py)

    @cached_property
    def where(self) -> str:
        return f"{self.label} {self.number}"

    @cached_property
    def first(self) -> str:
        """The block's first line: what a reader recognises it by."""
        return next((ln.strip() for ln in self.command.splitlines() if ln.strip()), self.command)[:80]

    @property
    def culprit(self) -> str:
        """The command that failed: the ERR trap's, or the block's first line."""
        return self.failed_at.command if self.failed_at is not None else self.first

    @property
    def at(self) -> str:
        if self.failed_at is not None:
            return f"`{self.failed_at.command}` (line {self.failed_at.line} of {self.where})"
        return f"{self.where} (`{self.first}`)"

    @property
    def subject(self) -> str:
        """`at` at the start of a sentence."""
        return self.at[0].upper() + self.at[1:]

    @property
    def mp_line(self) -> int | None:
        if self.failed_at is not None and self.line is not None:
            return self.line + self.failed_at.line
        return self.line

    @cached_property
    def text(self) -> str:
        return self.stderr + "\n" + self.stdout

    @cached_property
    def decisive(self) -> Decisive:
        return decisive(self.stderr + "\n" + self.stdout)

    @property
    def says(self) -> str:
        """The decisive lines of the output, quoted, after a sentence ("" when it printed nothing)."""
        if not self.decisive.lines:
            return ""
        return " The error output says: " + " / ".join(f"`{ln.strip()}`" for ln in self.decisive.lines) + "."

    @property
    def next_step(self) -> str | None:
        return self.decisive.next_step

    @property
    def resend(self) -> str:
        return f"then resend the MP with `Approves: {self.mp_id}`"


@dataclass(frozen=True)
class Rule:
    """`when` reads a failure (truthy: the rule applies, and its value, a regex match say,
    goes to `says`); `says` gives the summary, the diagnosis and the one fix."""

    kind: str
    when: Callable[[Failure], Any]
    says: Callable[[Failure, Any], tuple[str, str, str]]


def _not_found(f: Failure) -> Any:
    m = next((found for pattern in _NOT_FOUND if (found := pattern.search(f.text))), None)
    return m or (f.exit_code == 127)


def _killed_by_exit(f: Failure) -> int | None:
    """The number of the signal that killed a command, when the exit code says so (128 + N)."""
    if f.exit_code is not None and 128 < f.exit_code < 128 + 65 and f.exit_code != 128 + _signal.SIGPIPE:
        return f.exit_code - 128
    return None


# Ordered: what is known for certain (a timeout, a signal) first, then the error output,
# most specific pattern first; the last rule always applies.
RULES: list[Rule] = [
    Rule(
        "timeout",
        lambda f: f.timed_out and f.timeout_source == "Timeout",
        lambda f, _: (
            f"MP timeout in {f.where}",
            f"The MP's total time budget ran out during {f.where} (`{f.first}`); its whole process group was stopped.",
            f"Raise the budget with a `Timeout: {int(f.timeout * 2) or 1}` line under the MP title, {f.resend}.",
        ),
    ),
    Rule(
        "timeout",
        lambda f: f.timed_out,
        lambda f, _: (
            f"timeout in {f.where}",
            f"{f.where.capitalize()} (`{f.first}`) was still running after {f.timeout:g} s, so its whole process group "
            "was stopped.",
            f"Give the step more time with a `Step-Timeout: {int(f.timeout * 2) or 1}` line under the MP title, "
            f"{f.resend}.",
        ),
    ),
    Rule(
        "killed",
        lambda f: f.signal,  # the signal's number (never 0) or None
        lambda f, number: (
            f"{f.where} killed by {_signal_name(number)}",
            f"{f.where.capitalize()} (`{f.first}`) was killed by {_signal_name(number)}"
            + (" (SIGKILL from outside usually means the out-of-memory killer)" if number == _signal.SIGKILL else "")
            + ".",
            f"Check the engine host's kernel log (`dmesg`) for who sent {_signal_name(number)}, {f.resend}.",
        ),
    ),
    Rule(
        "sudo_password",
        lambda f: _SUDO.search(f.text),
        lambda f, _: (
            f"sudo asked for a password in {f.where}",
            f"{f.subject} ran sudo, which asked for a password; steps have no terminal to type it in.",
            f"Allow that command without a password for the engine's user (a NOPASSWD line in sudoers), {f.resend}.",
        ),
    ),
    Rule(
        "needs_terminal",
        lambda f: _TTY.search(f.text) or (f.failed_at is not None and "/dev/tty" in f.failed_at.command),
        lambda f, _: (
            f"terminal needed in {f.where}",
            f"{f.subject} needs a terminal (/dev/tty), and steps run without one.",
            f"Run `{f.culprit}` in its non-interactive form (a `--yes`/`--batch` option, or the answer as an "
            f"argument), {f.resend}.",
        ),
    ),
    Rule(
        "reads_stdin",
        lambda f: f.failed_at is not None and f.exit_code == 1 and _READ.match(f.failed_at.command),
        lambda f, _: (
            f"read from stdin in {f.where}",
            f"{f.subject} reads standard input, which is empty for steps (/dev/null), so it failed at end of input.",
            f"Put the value in the step instead of reading it (e.g. `name=value` in place of `{f.culprit}`), "
            f"{f.resend}.",
        ),
    ),
    Rule(
        "sigpipe",
        lambda f: f.exit_code == 128 + _signal.SIGPIPE,
        lambda f, _: (
            f"SIGPIPE in {f.where}",
            "A pipeline in "
            + (f"`{f.failed_at.source_line}` (line {f.failed_at.line} of {f.where})" if f.failed_at else f.at)
            + " exited 141: a command was killed by SIGPIPE because the reader after it exited first "
            "(as in `yes | head`); `-o pipefail` makes that fail the step.",
            f"If the reader stopping early is intended, end that pipeline with `|| [ $? -eq 141 ]`, {f.resend}.",
        ),
    ),
    Rule(
        "command_not_found",
        _not_found,
        lambda f, m: (
            f"command not found in {f.where}",
            f"{f.where.capitalize()} called `{_named(m, f)}`, which is not installed or not on the engine's PATH "
            f"(exit code {f.exit_code}).",
            f"Install `{_named(m, f)}` on the engine host so that it is on the daemon's PATH, {f.resend}.",
        ),
    ),
    Rule(
        "permission_denied",
        lambda f: _PERMISSION.search(f.text) or (f.exit_code == 126),
        lambda f, m: (
            f"permission denied in {f.where}",
            f"{f.where.capitalize()} was refused access to `{_named(m, f)}` (exit code {f.exit_code}).",
            f"Make `{_named(m, f)}` accessible to the engine's user (e.g. `chmod +x {_named(m, f)}` for a script) "
            f"in an earlier step, {f.resend}.",
        ),
    ),
    Rule(
        "killed",
        _killed_by_exit,
        lambda f, number: (
            f"{f.where}: a command was killed by {_signal_name(number)}",
            f"{f.subject} was killed by {_signal_name(number)} (exit code {f.exit_code} = 128 + {number}).",
            f"Find who sent {_signal_name(number)} to `{f.culprit}` (for SIGKILL, the kernel log: "
            f"`dmesg`), {f.resend}.",
        ),
    ),
    Rule(
        "disk_full",
        lambda f: _DISK_FULL.search(f.text),
        lambda f, _: (
            f"disk full in {f.where}",
            f"{f.where.capitalize()} failed because the disk (or quota) is full.",
            "Free space on the engine host's workspace filesystem, then send an MP that repeats the step.",
        ),
    ),
    Rule(
        "network",
        lambda f: _NETWORK.search(f.text),
        lambda f, _: (
            f"network error in {f.where}",
            f"{f.where.capitalize()} could not reach a network host: {_first_match_line(f.text, _NETWORK)}",
            f"Check that the engine host can reach that host, {f.resend}.",
        ),
    ),
    Rule(
        "syntax_error",
        lambda f: _SYNTAX.search(f.text),
        lambda f, _: (
            f"shell syntax error in {f.where}",
            f"The shell could not parse {f.where}: {_first_match_line(f.text, _SYNTAX)}",
            f"Correct the shell syntax of {f.where} (unbalanced quotes, `if` without `fi`, ...), {f.resend}.",
        ),
    ),
    Rule(
        "missing_file",
        lambda f: _NO_SUCH_FILE.search(f.text),
        lambda f, m: (
            f"missing file in {f.where}",
            f"{f.where.capitalize()} needs `{m.group(1)}`, which does not exist (steps run in the workspace root).",
            f"Create `{m.group(1)}` before {f.where} runs (or correct the path), {f.resend}.",
        ),
    ),
    Rule(
        "validation_failed",
        lambda f: f.label == "check",
        lambda f, _: (
            f"check {f.number} failed",
            f"The steps ran, but validation check {f.number} failed: {f.at} exited with code {f.exit_code}." + f.says,
            f"Correct the steps so that check {f.number} passes"
            + (f" ({f.next_step})" if f.next_step else "")
            + f", {f.resend}.",
        ),
    ),
    Rule(
        "nonzero_exit",
        lambda f: True,
        lambda f, _: (
            f"exit {f.exit_code} in {f.where}",
            f"{f.subject} exited with code {f.exit_code}." + (f.says or " It printed nothing that says why."),
            (f"In {f.where}, {f.next_step}" if f.next_step else f"Correct {f.at} according to the error output")
            + f", {f.resend}.",
        ),
    ),
]


def classify_process(failure: Failure) -> Diagnosis:
    """The diagnosis of the first rule that applies. With the ERR trap's record it quotes
    the command that failed and its line; without it, the block's first line."""
    for rule in RULES:
        found = rule.when(failure)
        if found:
            summary, text, fix = rule.says(failure, found)
            return Diagnosis(rule.kind, summary, text, fix, failure.step_id, failure.mp_line)
    raise AssertionError("the last rule always applies")


def _named(found: Any, f: Failure) -> str:
    """What a pattern captured, or else the failing command's first word."""
    return found.group(1) if isinstance(found, re.Match) else f.culprit.split()[0]


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
