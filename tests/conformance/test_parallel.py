"""Conformance for parallel tasks (issue #29): the real `claude` and `codex` CLIs, each as
the one level of a run with `max_parallel = 2`, carry out two independent tasks at once
against the fake model APIs, each in its own worktree.

"At once" is shown by the fake model itself: it holds each task's first answer until
both tasks' first requests have arrived, so neither task can finish before the other
began."""

from __future__ import annotations

import re
import threading

import pytest

from tests.agentutil import only_run
from tests.conformance import fakemodel as fm
from tests.conformance.fakeopenai import command
from tests.conformance.test_claude import claude  # noqa: F401  (the fixture)
from tests.conformance.test_codex import codex, codex_home_dir  # noqa: F401  (the fixtures)
from tests.conftest import result_field
from tests.gitutil import git
from tests.unit.agent.run.test_scheduler import listed

pytestmark = pytest.mark.conformance

TWO = listed(
    'Write "hello" to `out/a.txt`. (after none)',
    'Write "bye" to `out/b.txt`. (after none)',
    checks=[("MT-001", "grep -qx hello out/a.txt"), ("MT-002", "grep -qx bye out/b.txt")],
)
TASK_RE = re.compile(r"^## Your micro-task now: (MT-\d+)\n(.*?)^## ", re.M | re.S)


class BothFirst:
    """A model that answers each task's first request only once both tasks have asked
    (or after `patience` seconds, when they did not: the test then fails on the order)."""

    def __init__(self, act, patience: float = 60.0):
        self.act = act  # (req, content, path) -> the first turn: the edit
        self.seen: set[str] = set()
        self.both = threading.Event()
        self.patience = patience
        self.order: list[tuple[str, bool]] = []  # (MT id, a first request) in arrival order

    def __call__(self, req, count):
        said = fm.user_text(req)
        task = TASK_RE.search(said)
        assert task, "a worker's prompt names its micro-task"
        mt = task.group(1)
        first = "Wrote" not in said and not _answered(req)
        self.order.append((mt, first))
        if not first:
            return fm.text(f"Wrote it.\n\n{fm.status_block(fm.nonce_of(req))}")
        self.seen.add(mt)
        if len(self.seen) == 2:
            self.both.set()
        self.both.wait(self.patience)
        content, path = re.search(r'Write "([^"]*)" to `([^`]+)`', task.group(2)).groups()
        return self.act(req, content, path)


def _answered(req) -> bool:
    """The request carries a tool's result (the agent's second turn)."""
    items = list(req.get("messages") or []) + list(req.get("input") if isinstance(req.get("input"), list) else [])
    for m in items:
        if m.get("type") == "function_call_output":
            return True
        content = m.get("content")
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            return True
    return False


def check_two_at_once(ws, model: BothFirst, result) -> None:
    assert result.action == "completed", ws.result_file.read_text()
    assert result_field(ws, "Certificate") == "EXACT"
    assert model.both.is_set(), model.order  # both tasks had asked before either was answered
    firsts = [mt for mt, first in model.order if first]
    assert sorted(firsts[:2]) == ["MT-001", "MT-002"], model.order
    assert (ws.root / "out/a.txt").read_text() == "hello\n" and (ws.root / "out/b.txt").read_text() == "bye\n"
    run = only_run(ws)
    subjects = git(ws.root, "log", "--format=%s", "-2").splitlines()
    assert sorted(s.split(":")[0] for s in subjects) == ["MP-9.1 MT-001", "MP-9.1 MT-002"]
    import json

    tasks = json.loads((ws.system_dir / "RESULT_last.json").read_text())["micro_tasks"]
    assert {t["mt_id"]: t["overlapped_with"] for t in tasks} == {"MT-001": ["MT-002"], "MT-002": ["MT-001"]}
    assert not (ws.local_dir / "work" / run.run_id).exists()


def test_claude_runs_two_tasks_at_once(claude, ws):  # noqa: F811
    model = BothFirst(
        lambda req, content, path: fm.tool("Write", file_path=f"{fm.workdir_of(req)}/{path}", content=content + "\n")
    )
    result, _api = claude(model, TWO, max_parallel=2)
    check_two_at_once(ws, model, result)


def test_codex_runs_two_tasks_at_once(codex, ws):  # noqa: F811
    model = BothFirst(lambda req, content, path: command(f"mkdir -p out && printf '{content}\\n' > {path}"))
    result, _api = codex(model, TWO, max_parallel=2)
    check_two_at_once(ws, model, result)
