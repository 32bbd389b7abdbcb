"""The rules of the house (issue #13), checked like any other behaviour: module sizes, a
test file beside every module, and git run through one runner only. The layer contracts
are import-linter's (pyproject.toml), run by `make lint`."""

from __future__ import annotations

import ast
import json
import statistics
import sys

from mp_engine import __version__
from mp_engine.core.workspace import config_template
from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "mp_engine"
# Modules whose behaviour is tested through another module's tests, and why.
TESTED_ELSEWHERE = {
    "agent/run/review": "tests/unit/agent/state/test_review.py (the reviewer's round through Engine.tick())",
    "agent/run/gates": "tests/unit/agent/state/test_approval.py and test_review.py (the result and status)",
    "agent/state/ci": "tests/unit/agent/state/test_campaign.py (CI's fix task) and tests/e2e/test_pull_request.py",
    "agent/run/repo": "tests/unit/agent/run/test_on_repository.py and tests/e2e/test_pull_request.py",
    "agent/run/resume": "tests/unit/agent/run/test_loop.py (pauses and restarts) and test_rounds.py (a pause after planning)",
    "agent/state/model": "tests/unit/agent/state/test_iteration.py, test_campaign.py, test_tasks.py",
    "agent/state/kinds": "tests/unit/agent/state/test_apply.py (every kind has its reducer)",
    "agent/state/ending": "tests/unit/agent/state/test_iteration.py (skips, the next task, the run's end), test_tasks.py",
    "agent/state/planning": "tests/unit/agent/state/test_campaign.py",
    "agent/state/followup": "tests/unit/agent/state/test_ci.py and test_review.py (the tasks they add)",
    "agent/scope": "tests/unit/agent/run/test_attempt.py, test_recorder.py (parts built from the scopes)",
    "agent/api": "tests/unit/test_house.py (the import contract) and every engine test (AgentExecutor)",
    "agent/run/sidesteps": "tests/unit/agent/run/test_rounds.py (planning rounds and drift checks through Engine.tick)",
    "agent/run/placement": "tests/unit/agent/run/test_loop.py (in place) and test_scheduler.py (worktrees)",
    "agent/call/invoke": "tests/unit/agent/call/test_classify.py and test_caller.py (run_agent through the Caller)",
    "__main__": "tests/unit/cli/test_main.py runs `python -m mp_engine`",
    "cli/group": "tests/unit/cli/test_main.py",
    "cli/workspace": "tests/unit/cli/test_main.py and tests/e2e/cmd_init, cmd_doctor, cmd_check, cmd_service",
    "cli/engine": "tests/unit/cli/test_main.py and tests/e2e/cmd_once, cmd_approve, cmd_loop, test_daemon.py",
    "cli/inspect": "tests/unit/cli/test_main.py and tests/e2e/cmd_status, cmd_history, cmd_logs",
    "pipeline/context": "two dataclasses, used by every engine test",
    "core/errors": "raised and checked throughout",
    "core/terminal": "tests/unit/commands/test_check.py and test_status.py (control characters escaped)",
    "views/status": "tests/unit/commands/test_status.py",
    "views/history": "tests/unit/commands/test_history.py",
    "execute/base": "the Executor protocol; tests/unit/execute/test_shell.py",
    "commands/run": "tests/e2e/test_daemon.py runs the daemon",
    "client/send": "tests/e2e/cmd_send/test_send.py",
    "client/remote": "tests/e2e/cmd_send/test_send.py (status --remote against the real daemon and its heartbeat)",
    "client/mcp/server": "tests/e2e/cmd_mcp/test_mcp.py (the SDK's client over stdio and HTTP, the real daemon), "
    "test_oauth.py (the SDK's OAuth client through a TLS tunnel), test_action.py (the GPT Action over HTTP)",
    "client/mcp/clients": "tests/e2e/cmd_mcp/test_oauth.py (mcp clients, mcp revoke), test_action.py (clients add)",
    "pipeline/cancel_waiting": "tests/e2e/test_operator.py (the real daemon: a waiting MP cancelled, a request ignored)",
    "commands/status": "tests/unit/commands/test_status.py",
    "commands/logs": "tests/unit/commands/test_logs.py",
    "commands/service": "tests/unit/commands/test_service.py",
    "commands/doctor/check": "tests/unit/commands/test_doctor.py",
    "execute/relay_inside": "tests/unit/execute/test_sandbox.py (allowed hosts through the real sandbox) and the "
    "conformance rows *_in_the_engine_sandbox (the real CLIs through it)",
    "commands/doctor/run": "tests/unit/commands/test_doctor.py",
    "commands/doctor/git": "tests/unit/commands/test_doctor.py",
    "commands/doctor/host": "tests/unit/commands/test_doctor.py",
    "commands/doctor/workspace": "tests/unit/commands/test_doctor.py",
    "agent/executor": "tests/unit/agent/run/test_loop.py",
    "agent/run/parts": "tests/unit/agent/run/test_attempt.py (the parts an attempt runs with)",
    "agent/prompt/learnings": "tests/unit/agent/prompt/test_learnings.py",
    "inbox/watchers/native": "tests/unit/inbox/watchers/test_observers.py",
    "inbox/watchers/polling": "tests/unit/inbox/watchers/test_observers.py",
    "inbox/watchers/base": "tests/unit/inbox/watchers/test_observers.py",
    "inbox/header": "tests/unit/inbox/test_mpfile.py",
    "record/outcome": "tests/unit/record/test_result.py",
    "sync/context": "tests/unit/sync/test_pull.py, test_push.py",
    "daemon/metrics": "tests/unit/daemon/test_metrics.py, test_metrics_counters.py",
    "daemon/notify": "tests/unit/daemon/test_notify.py",
    "commands/doctor/fleet": "tests/unit/commands/test_doctor.py (and tests/e2e/test_fleet.py: no worker polling)",
    "fleet/dispatch": "tests/e2e/test_fleet.py (the engine's side against a real Temporal server and real workers)",
    "fleet/worker": "tests/e2e/test_fleet.py (`mp-engine worker` processes: killed, cancelled, late)",
    "fleet/workflow": "tests/e2e/test_fleet.py (retried on another worker, cancelled, re-attached)",
    "commands/loop": "tests/e2e/cmd_loop/test_loop.py",
    "cli/orchestrator": "tests/e2e/cmd_send/test_send.py (send) and tests/e2e/cmd_mcp/test_mcp.py (mcp)",
    "commands/notify": "tests/e2e/test_alerts.py (`mp-engine notify test` against a local receiver)",
    "config/load": "tests/unit/config/test_config.py, test_load.py",
    "config/section": "tests/unit/config/test_config.py",
    "config/sections": "tests/unit/config/test_config.py",
    "config/agent": "tests/unit/config/test_config.py and tests/unit/agent/call/test_chain.py",
    "config/fleet": "tests/unit/fleet/test_temporal.py (the section's own checks)",
    "config/notify": "tests/unit/alerts/test_deliver.py",
    "config/dashboard": "tests/unit/config/test_config.py (off by default, the address checked)",
    "config/diagnose": "tests/unit/agent/test_consult.py (off by default, a level that does not exist refused)",
    "agent/run/answers": "tests/unit/pipeline/test_answering.py (answers recorded as ledger steps and replayed)",
    "agent/state/answer": "tests/unit/pipeline/test_answering.py (one task at a time, and at once)",
    "commands/answer": "tests/e2e/test_answer_daemon.py (`mp-engine answer` against the real daemon)",
    "forge/base": "the protocol and its data; tests/unit/forge/test_github.py (the GitHub face), test_memory.py",
    "forge/githubapi": "tests/unit/forge/test_github.py (retries, rate limits, the token's repr, ETags)",
    "forge/githuberrors": "tests/unit/forge/test_github.py (each rule, against the GitHub double)",
    "client/send_request": "tests/e2e/cmd_send/test_send.py (--cancel) and tests/e2e/test_answer_daemon.py (--answer)",
    "eval/command": "tests/e2e/cmd_eval/test_eval.py (`mp-engine eval` as a process: task sets, comparisons, kill -9)",
    "eval/markdown": "tests/unit/eval/test_report.py (the report rendered, a task's text escaped)",
    "eval/page": "tests/unit/eval/test_report.py (the page and its plots, a task's text escaped)",
}


def modules() -> dict[str, int]:
    """{"sync/pull": non-blank lines} for every module but package markers."""
    return {
        str(p.relative_to(PACKAGE).with_suffix("")): sum(1 for line in p.read_text().splitlines() if line.strip())
        for p in PACKAGE.rglob("*.py")
        if p.name != "__init__.py"
    }


def test_no_module_over_400_non_blank_lines_and_the_median_at_most_120():
    sizes = modules()
    assert max(sizes.values()) <= 400, max(sizes, key=sizes.get)
    assert statistics.median(sizes.values()) <= 120


def test_no_function_over_60_lines_without_a_reason_in_its_docstring():
    """Issue #40: a longer function says why in its docstring ("Long because ...")."""
    long = []
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = sum(1 for line in lines[node.lineno - 1 : node.end_lineno] if line.strip())
                if size > 60 and "long because" not in " ".join((ast.get_docstring(node) or "").split()).lower():
                    long.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} {node.name} ({size} lines)")
    assert long == []


def test_no_formatter_squeezes():
    """Issue #40: `ruff format` lays the code out (`make lint` checks it); nothing opts out."""
    squeezed = [str(p.relative_to(REPO_ROOT)) for p in PACKAGE.rglob("*.py") if "# fmt: skip" in p.read_text()]
    assert squeezed == []


def test_every_module_has_a_test_file_mirroring_it_or_says_where_it_is_tested():
    missing = []
    for name in modules():
        if name.endswith("/__init__"):
            name = name.removesuffix("/__init__")
        folder, _, leaf = name.rpartition("/")
        mirror = REPO_ROOT / "tests" / "unit" / folder / f"test_{leaf}.py"
        if not mirror.exists() and name not in TESTED_ELSEWHERE:
            missing.append(name)
    assert missing == []
    for where in TESTED_ELSEWHERE.values():
        path = where.split(" ")[0].rstrip(",")
        assert not path.startswith("tests/") or (REPO_ROOT / path).exists(), where


def test_git_is_spawned_only_by_the_one_runner():
    """No module but gitcmd.py starts processes named git (GitPython's Repo is used for
    reading refs only, never its `repo.git` command wrapper)."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "gitcmd.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == "git" and _in_argv(tree, node):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
            if isinstance(node, ast.Attribute) and node.attr in ("execute", "git") and _on_repo(node):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert offenders == []


def _in_argv(tree: ast.AST, const: ast.Constant) -> bool:
    """The constant opens a list literal (an argv such as ["git", ...])."""
    for node in ast.walk(tree):
        if isinstance(node, ast.List) and node.elts and node.elts[0] is const:
            return True
    return False


def _on_repo(node: ast.Attribute) -> bool:
    return isinstance(node.value, ast.Attribute) and node.value.attr == "repo"


def test_the_repository_s_own_workspace_files_are_what_init_writes():
    """`make run` uses this repository as a workspace: its configuration shows every
    section, as `init` writes it, and its state names the current version."""
    assert (REPO_ROOT / "mp-engine.toml").read_text() == config_template()
    state = json.loads((REPO_ROOT / "SESSION_STATE.json").read_text())
    assert state["engine_version"] == __version__ and state["status"] == "OFFLINE"


# The rooms of the walk: the packages under mp_engine/ (pipeline/ is one room: its stages
# call each other within it); the foundations (core/, config/) are not rooms.
FOUNDATIONS = {"core", "config"}


def _room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "mp_engine" or len(parts) < 2 or parts[1] in FOUNDATIONS:
        return None
    return parts[1]


def walk_of_a_plain_mp(tmp_path) -> list[str]:
    """The rooms one plain MP with git on passes through, from the poll that brings it to
    the push of its result: every call from code in one room into another (issue #40: from
    any module, not only the pipeline's; a call from a foundation counts for the room that
    called the foundation), consecutive calls into one room counted once. Calls that only
    read or build data (properties, dunder methods) are not steps of the walk."""
    from tests.gitutil import HELLO, clone, engine_workspace, make_engine, make_remote, push_mp, sync_tick

    bare = make_remote(tmp_path)
    engine = make_engine(engine_workspace(tmp_path, f"file://{bare}"))
    engine.inbox.settle = 0
    orch = clone(f"file://{bare}", tmp_path / "orch")
    sync_tick(engine)
    push_mp(orch, HELLO)
    rooms: list[str] = []
    pushed = []

    def trace(frame, event, arg):
        if event != "call" or pushed:
            return
        callee, caller = _room(frame.f_globals.get("__name__", "")), frame.f_back
        while caller is not None and _room(caller.f_globals.get("__name__", "")) is None:
            if not caller.f_globals.get("__name__", "").startswith("mp_engine"):
                return  # called from outside the package (a library's callback, the test)
            caller = caller.f_back  # through a foundation, to the room that called it
        caller_room = _room(caller.f_globals.get("__name__", "")) if caller else None
        if callee is None or caller_room is None or callee == caller_room:
            return
        name, owner = frame.f_code.co_name, frame.f_locals.get("self")
        if name.startswith(("__", "<")) or (
            owner is not None and isinstance(getattr(type(owner), name, None), property)
        ):
            return
        if not rooms or rooms[-1] != callee:
            rooms.append(callee)
        if caller_room == "pipeline" and callee == "sync" and name == "publish":
            pushed.append(True)  # the result is committed and pushed: the walk ends here

    sys.setprofile(trace)
    try:
        result = sync_tick(engine)
    finally:
        sys.setprofile(None)
    engine.sync.close()
    assert result.action == "completed" and pushed
    return rooms


def test_a_plain_mp_walks_through_at_most_20_crossings_and_docs_show_the_walk(tmp_path):
    """Issues #28 and #40: the path an MP takes reads like the pipeline. docs/ARCHITECTURE.md
    shows the walk measured here, so a change that lengthens it changes the doc too; the
    crossings back into a room already left may not grow either."""
    rooms = walk_of_a_plain_mp(tmp_path)
    crossings = len(rooms) - 1
    back = sum(1 for i, room in enumerate(rooms) if room in rooms[:i])
    assert crossings <= 20 and back <= 13, (" > ".join(rooms), back)
    doc = (REPO_ROOT / "docs" / "ARCHITECTURE.md").read_text()
    assert " > ".join(rooms) in doc, " > ".join(rooms)
    assert f"{crossings} crossings, {back} of them back" in doc


def test_no_import_cycles_counted_as_python_runs_the_imports():
    """Issue #28: `lint-imports` resolves `from mp_engine.sync import pull` to the submodule,
    but Python first runs the package face (`sync/__init__.py`). Counted as executed: every
    import statement (function-level ones too, `if TYPE_CHECKING:` ones not), each naming
    its module and, for `from P import name`, the package P itself."""
    modules = {
        ".".join(p.relative_to(REPO_ROOT).with_suffix("").parts).removesuffix(".__init__"): p
        for p in PACKAGE.rglob("*.py")
    }
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        skipped = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)
        }
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            else:
                continue
            graph[name] |= {t for t in targets if t in modules and t != name}
    assert _cycles(graph) == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found
