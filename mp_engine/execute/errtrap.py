"""Which command of a bash step failed, and on which line: an ERR trap with a side channel.

A bash block runs as `bash ... -c '<prelude>; . "$0"' <script>`: the script stays exactly
as the MP wrote it (and `$0` is still its path), and bash's ERR trap, which fires where
`-e` would stop the shell, writes `$?`, `$LINENO` and `$BASH_COMMAND` to a file beside the
step's output. The step's own stdout and stderr are untouched. The trap overwrites the
file, so a script that turns `-e` off and fails in a loop leaves one line, not a log.

`exit 3` is no failing command, so the ERR trap never sees it (issue #44: the fix then
quoted the block's first line). The prelude also defines `exit` as a function that writes
the same record, the line from `BASH_LINENO`, before the builtin exits; only for an `exit`
written in the block itself (not in a file it sources), and a script's own `exit`
function replaces it. Functions are not exported, so the commands a step runs never see it.

The record is believed only when its exit status is the step's: a script that survived a
failure under `set +e` and then ran `exit 3` is not blamed on the earlier command.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

TRAP_SUFFIX = ".failed-at"


@dataclass(frozen=True)
class FailedAt:
    status: int
    line: int  # 1-based, within the block
    command: str  # bash's `$BASH_COMMAND`: the simple command that failed
    source_line: str  # that line of the block as written (a whole pipeline, say)


def bash_argv(shell: str, script: Path, trap_file: Path) -> list[str]:
    """The argv that runs `script` under `-e -o pipefail` with the ERR trap set."""
    target = shlex.quote(str(trap_file))
    record = f'printf "%s\\t%s\\t%s\\n" "$?" "$LINENO" "$BASH_COMMAND" > {target}'
    on_exit = (
        'exit() { local __mp_status=$?; [ "${BASH_SOURCE[1]-}" = "$0" ] && '
        f'printf "%s\\t%s\\t%s\\n" "${{1-$__mp_status}}" "${{BASH_LINENO[0]}}" "exit${{1+ $*}}" 2>/dev/null > {target} || :; '
        'builtin exit "${@:-$__mp_status}"; }'
    )
    prelude = f'{on_exit}; trap {shlex.quote(record)} ERR; . "$0"'
    return [shell, "--noprofile", "--norc", "-e", "-o", "pipefail", "-o", "errtrace", "-c", prelude, str(script)]


def read_failed_at(trap_file: Path, exit_code: int | None, body: str) -> FailedAt | None:
    """The trap's record of the failing command, if it is about this exit."""
    try:
        raw = trap_file.read_bytes()[:16384].decode("utf-8", errors="replace")
    except OSError:
        return None
    status, _, rest = raw.rstrip("\n").partition("\t")
    line, _, command = rest.partition("\t")
    if not (status.isdigit() and line.isdigit()) or int(status) != exit_code:
        return None
    lines = body.splitlines()
    number = int(line)
    source = lines[number - 1].strip() if 0 < number <= len(lines) else ""
    return FailedAt(int(status), number, command.strip()[:300], source[:300])
