"""`mp-engine cancel`: ask the daemon on this host to cancel an MP, and say what happened."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mp_engine.commands import taken
from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.workspace import Workspace
from mp_engine.inbox.cancel_request import host_path, request_on_host
from mp_engine.inbox.header import MP_ID_RE
from mp_engine.record.stateview import read_view


def cancel(
    root: Path, mp_id: str | None, timeout: float, echo: Callable[[str], None], err: Callable[[str], None]
) -> ExitCode:
    ws = Workspace.at(root)
    ws.check()
    state = read_view(ws.state_file)
    if mp_id is None:
        if not state.run_id:
            err(
                f"nothing to cancel: no MP is running (the engine is {state.status}); name one: `mp-engine cancel MP-1.4`"
            )
            return ExitCode.USAGE
        mp_id = state.current
    if not MP_ID_RE.match(mp_id):
        err(f"{mp_id!r} is not an MP id; give one like MP-1.4")
        return ExitCode.USAGE
    request_on_host(ws, mp_id)
    if not taken(host_path(ws), timeout):
        err(
            f"asked to cancel {mp_id}, but the engine has not acted within {timeout:g} s; the request stays in "
            f"{ws.rel(host_path(ws))} and takes effect when the daemon runs (`mp-engine status` says whether it does)"
        )
        return ExitCode.SEND_TIMEOUT
    last = read_view(ws.state_file).last_result or {}
    if last.get("mp_id") == mp_id and last.get("status") == "CANCELLED":
        echo(f"cancelled {mp_id} (run {last.get('run_id')}, SYSTEM/RESULT_last.md)")
    else:
        echo(f"{mp_id} was not cancelled: it was not running or waiting (see `mp-engine logs`, event cancel_ignored)")
    return ExitCode.OK
