"""The agent's side of a task: a workspace whose repository is a fresh copy of the task's
repository at its base commit (`mp-engine init` in it, the configuration under test as its
mp-engine.toml), and the agent MP in its inbox, as a person would drop it. `mp-engine once`
then runs it like any MP (child.py): the configured chain, planner, sandbox and all.

What the eval changes of a configuration, and why (`overrides`): no git channel (a task's
workspace has no remote, and nothing is pushed), no settle time (the MP is written whole), no
dashboard, metrics or alerts (N throwaway workspaces would fight for a port and page a person
about every failed task), and the eval's own files hidden from the sandbox.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mp_engine.core.atomic import atomic_write, atomic_write_json
from mp_engine.core.clock import now_iso
from mp_engine.core.workspace import CONFIG_FILE, Workspace, init_workspace
from mp_engine.eval.checkout import fresh_copy
from mp_engine.eval.tasks import Task

MP_ID = "MP-1.1"
NO_CHECK = "true"  # a task set that exposes no check: the agent's claim ends its run (never its verdict)


def overrides(config_file: Path, hide: Sequence[Path]) -> dict[str, str]:
    """The `MP_ENGINE_*` variables `once` runs a task's workspace with (the module says why)."""
    data = tomllib.loads(config_file.read_text(encoding="utf-8"))
    agent = data.get("agent") if isinstance(data.get("agent"), dict) else {}
    hidden = [*(agent or {}).get("sandbox_hide", []), *(str(p) for p in hide)]
    return {
        "MP_ENGINE_GIT__ENABLED": "false",
        "MP_ENGINE_ENGINE__SETTLE_SECONDS": "0",
        "MP_ENGINE_DASHBOARD__LISTEN": "",
        "MP_ENGINE_METRICS__LISTEN": "",
        "MP_ENGINE_NOTIFY__URLS": "[]",
        "MP_ENGINE_NOTIFY__URLS_ENV": "",
        "MP_ENGINE_NOTIFY__COMMAND": "[]",
        "MP_ENGINE_AGENT__SANDBOX_HIDE": json.dumps(list(dict.fromkeys(hidden))),
    }


def compose(task: Task) -> str:
    """The agent MP of a task: its problem statement as the goal, quoted so that nothing in it
    (a list, a heading, a fence) is read as the MP's structure; the set's checks as Validate."""
    quoted = "\n".join(f"> {line}" if line.strip() else ">" for line in task.problem_statement.strip().splitlines())
    body = [
        f"# {MP_ID} {task.instance_id}",
        "Executor: agent",
        "",
        f"Resolve this issue in the repository (`{task.repo}`). The issue, as reported:",
        "",
        quoted,
        "",
        "## Validate",
        "",
    ]
    for check in task.checks or (NO_CHECK,):
        fence = "````" if "```" in check else "```"
        body += [f"{fence}bash", check.rstrip("\n"), fence, ""]
    return "\n".join(body)


def prepare(task: Task, source: Path, base: str, config_file: Path, ws_root: Path, marker: Path) -> dict[str, Any]:
    """The task's workspace at `ws_root` (made anew), its MP waiting in the inbox; `marker`
    records that it is ready, so a resumed eval runs it rather than making it again."""
    shutil.rmtree(ws_root, ignore_errors=True)
    marker.unlink(missing_ok=True)
    fresh_copy(source, base, ws_root)
    ws, _ = init_workspace(ws_root)
    shutil.copyfile(config_file, ws.root / CONFIG_FILE)
    atomic_write(ws.inbox_file, compose(task))
    info = {"mp_id": MP_ID, "base": base, "prepared_at": now_iso(), "workspace": str(ws.root)}
    atomic_write_json(marker, info)
    return info


def run_result(ws_root: Path) -> tuple[Path, dict[str, Any]] | None:
    """The run of the task's MP and its result, once the engine has recorded one."""
    ws = Workspace.at(ws_root) if ws_root.exists() else None
    if ws is None or not ws.runs_dir.is_dir():
        return None
    for run in sorted(ws.runs_dir.glob(f"*-{MP_ID}"), reverse=True):
        try:
            result = json.loads((run / "result.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(result, dict) and result.get("mp_id") == MP_ID:
            return run, result
    return None
