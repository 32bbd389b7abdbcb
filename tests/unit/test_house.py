"""The rules of the house (issue #13), checked like any other behaviour: module sizes, a
test file beside every module, and git run through one runner only. The layer contracts
are import-linter's (pyproject.toml), run by `make lint`."""

from __future__ import annotations

import ast
import json
import statistics

from mp_engine import __version__
from mp_engine.workspace import config_template
from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "mp_engine"
# Modules whose behaviour is tested through another module's tests, and why.
TESTED_ELSEWHERE = {
    "agent/resume": "tests/unit/agent/test_loop.py (pauses and restarts) and test_campaign.py (a pause after planning)",
    "agent/taskstate": "tests/unit/agent/test_loopstate.py, test_campaignstate.py",
    "__main__": "tests/unit/test_cli.py runs `python -m mp_engine`",
    "cli": "tests/unit/test_cli.py",
    "context": "two dataclasses, used by every engine test",
    "errors": "raised and checked throughout",
    "execute/base": "the Executor protocol; tests/unit/execute/test_shell.py",
    "commands/run": "tests/e2e/test_daemon.py runs the daemon",
    "commands/send": "tests/e2e/cmd_send/test_send.py",
    "commands/remote": "tests/e2e/cmd_send/test_send.py (status --remote against the real daemon and its heartbeat)",
    "commands/mcp": "tests/e2e/cmd_mcp/test_mcp.py (the SDK's client over stdio and streamable HTTP, the real daemon)",
    "cancel_waiting": "tests/e2e/test_operator.py (the real daemon: a waiting MP cancelled, a request ignored)",
    "commands/status": "tests/unit/commands/test_status.py",
    "commands/logs": "tests/unit/commands/test_logs.py",
    "commands/service": "tests/unit/commands/test_service.py",
    "commands/doctor/check": "tests/unit/commands/test_doctor.py",
    "commands/doctor/run": "tests/unit/commands/test_doctor.py",
    "commands/doctor/git": "tests/unit/commands/test_doctor.py",
    "commands/doctor/host": "tests/unit/commands/test_doctor.py",
    "commands/doctor/workspace": "tests/unit/commands/test_doctor.py",
    "agent/executor": "tests/unit/agent/test_loop.py",
    "agent/parts": "tests/unit/agent/test_attempt.py (the parts an attempt runs with)",
    "agent/learnings": "tests/unit/agent/test_learnings.py",
    "inbox/watchers/native": "tests/unit/inbox/watchers/test_observers.py",
    "inbox/watchers/polling": "tests/unit/inbox/watchers/test_observers.py",
    "inbox/watchers/base": "tests/unit/inbox/watchers/test_observers.py",
    "inbox/header": "tests/unit/inbox/test_mpfile.py",
    "record/outcome": "tests/unit/record/test_result.py",
    "sync/context": "tests/unit/sync/test_pull.py, test_push.py",
    "daemon/metrics": "tests/unit/daemon/test_metrics.py, test_metrics_counters.py",
    "daemon/notify": "tests/unit/daemon/test_notify.py",
}


def modules() -> dict[str, int]:
    """{"sync/pull": lines} for every module but package markers."""
    return {
        str(p.relative_to(PACKAGE).with_suffix("")): len(p.read_text().splitlines())
        for p in PACKAGE.rglob("*.py")
        if p.name != "__init__.py"
    }


def test_no_module_over_400_lines_and_the_median_at_most_120():
    sizes = modules()
    assert max(sizes.values()) <= 400, max(sizes, key=sizes.get)
    assert statistics.median(sizes.values()) <= 120


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
