"""`mp-engine answer`: answer, on the engine host, the agent MP the engine is halted on
because it asked (inbox/answer.py); the same run goes on. Says what the engine did."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mp_engine.commands import taken
from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.workspace import Workspace
from mp_engine.inbox.answer import host_path, write_host
from mp_engine.inbox.header import MP_ID_RE
from mp_engine.record.stateview import read_view


def answer(
    root: Path,
    mp_id: str,
    text: str,
    mt: str | None,
    timeout: float,
    echo: Callable[[str], None],
    err: Callable[[str], None],
) -> ExitCode:
    ws = Workspace.at(root)
    ws.check()
    if not MP_ID_RE.match(mp_id):
        err(f"{mp_id!r} is not an MP id; give one like MP-1.4")
        return ExitCode.USAGE
    if not text.strip():
        err("the answer is empty; give it as TEXT, or with --file F (`-` reads stdin)")
        return ExitCode.USAGE
    halt = read_view(ws.state_file).halt
    if halt is None or halt.mp_id != mp_id:
        on = f"halted on {halt.mp_id}" if halt else "not halted"
        err(f"{mp_id} waits for no answer: the engine is {on}. `mp-engine status` says what it waits for.")
        return ExitCode.NOT_RUNNABLE
    write_host(ws, mp_id, text, mt)
    if not taken(host_path(ws), timeout):
        err(
            f"the answer to {mp_id} waits in {ws.rel(host_path(ws))}: the engine has not taken it within "
            f"{timeout:g} s; it does when the daemon runs (`mp-engine status` says whether it does)"
        )
        return ExitCode.SEND_TIMEOUT
    state = read_view(ws.state_file)
    if state.current == mp_id and state.status == "RUNNING":
        echo(f"answered {mp_id}: its run {state.run_id} goes on (`mp-engine status`, then SYSTEM/RESULT_last.md)")
        return ExitCode.OK
    err(f"the engine refused the answer to {mp_id} (`mp-engine logs`, event answer_refused says why)")
    return ExitCode.NOT_RUNNABLE
