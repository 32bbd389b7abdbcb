"""Tasks from a repository's own history (`mp-engine eval --from-history REPO`): commits that
changed code and tests together, newest first. A commit becomes a task when its tests fail
before it (its parent with only its test changes) and pass at it; its code changes are what
the agent must redo from the parent, its message is the goal, its tests judge the work.

The task is the same SWE-bench-style task as any other: the base is the parent (whose history
stops there, so the fix cannot be looked up), the test patch is the commit's test part,
FAIL_TO_PASS its test files that failed before, PASS_TO_PASS those that passed both times.
The selection is kept in the eval directory (`history.json`), so a resumed eval does not
verify it again.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from mp_engine.core.atomic import atomic_write_json
from mp_engine.core.errors import ConfigError
from mp_engine.core.gitcmd import git
from mp_engine.eval import checkout
from mp_engine.eval.layout import EvalDir, safe
from mp_engine.eval.tasks import Task, TaskSet
from mp_engine.eval.testcmd import Shell, outcomes

DEFAULT_TEST = "python3 -m pytest -q {tests}"
TEST_DIR = re.compile(r"(^|/)(tests?|spec|specs|__tests__|testing)/")
TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test\.[^/]+|[^/]*\.test\.[^/]+|[^/]*_spec\.[^/]+|[^/]*Tests?\.[^/]+)$")
SCAN_LIMIT = 500  # commits looked at, at most, to find N tasks


def is_test(path: str) -> bool:
    """A test file by the usual conventions: under tests/, test/ or spec/, or named so."""
    return bool(TEST_DIR.search(path) or TEST_FILE.search(path))


def from_history(
    repo: Path,
    out: EvalDir,
    *,
    since: str | None,
    count: int,
    test: str | None,
    setup: str,
    say: Callable[[str], None],
) -> TaskSet:
    """Up to `count` verified tasks from `repo`'s commits (after `since`), newest first."""
    source = repo.resolve()
    if not (source / ".git").exists() and not (source / "HEAD").exists():
        raise ConfigError(f"--from-history {repo}: not a git repository")
    test = test or DEFAULT_TEST
    params = {"repo": str(source), "since": since, "count": count, "test": test, "setup": setup}
    cache = out.root / "history.json"
    if cache.exists():
        kept = json.loads(cache.read_text(encoding="utf-8"))
        if kept.get("params") == params:
            return TaskSet(source.name, [Task.from_json(t) for t in kept["tasks"]])
    name = safe(source.name)
    mirror = out.mirror(name)
    checkout.mirror(str(source), mirror, "HEAD")
    picker = Picker(mirror, name, str(source), test, setup, out.root / "history")
    tasks, skipped = picker.pick(since, count, say)
    atomic_write_json(cache, {"params": params, "tasks": [t.to_json() for t in tasks], "skipped": skipped})
    if not tasks:
        raise ConfigError(
            f"--from-history {repo}: no commit qualified ({len(skipped)} looked at; {out.root / 'history.json'} says "
            "why each was skipped). A task needs a commit that changes code and tests, whose tests fail before it "
            "and pass at it: check --test (and --setup)"
        )
    return TaskSet(source.name, tasks)


class Picker:
    """Commits turned into verified tasks, in a scratch directory of the eval's."""

    def __init__(self, mirror: Path, name: str, url: str, test: str, setup: str, scratch: Path):
        self.mirror, self.name, self.url, self.test, self.setup, self.scratch = mirror, name, url, test, setup, scratch

    def pick(
        self, since: str | None, count: int, say: Callable[[str], None]
    ) -> tuple[list[Task], list[dict[str, str]]]:
        rev = f"{since}..HEAD" if since else "HEAD"
        log = git(self.mirror, "log", "--no-merges", "--format=%H", f"--max-count={SCAN_LIMIT}", rev).out.split()
        tasks: list[Task] = []
        skipped: list[dict[str, str]] = []
        for sha in log:
            if len(tasks) >= count:
                break
            task, why = self.task(sha)
            if task is None:
                skipped.append({"commit": sha, "why": why})
                continue
            say(f"history: {sha[:12]} is a task ({len(task.fail_to_pass)} failing test file(s) before it)")
            tasks.append(task)
        shutil.rmtree(self.scratch, ignore_errors=True)
        return tasks, skipped

    def task(self, sha: str) -> tuple[Task | None, str]:
        """The commit as a task, or None and why not."""
        parents = git(self.mirror, "rev-list", "--parents", "-n", "1", sha).out.split()[1:]
        if len(parents) != 1:
            return None, "a root commit: there is no before"
        changed = git(self.mirror, "diff", "--name-only", "--no-renames", parents[0], sha).out.split("\n")
        tests = [p for p in changed if p and is_test(p)]
        code = [p for p in changed if p and not is_test(p)]
        if not tests or not code:
            return None, "it does not change code and tests together"
        existing = set(git(self.mirror, "ls-tree", "-r", "--name-only", sha, "--", *tests).out.split("\n"))
        ids = [t for t in tests if t in existing]
        test_patch = self.diff(parents[0], sha, tests)
        before = self.run(parents[0], test_patch, ids, "before")
        after = self.run(sha, "", ids, "after")
        if before is None or after is None:
            return None, "the setup or the test patch failed"
        if not all(after.values()):
            return None, f"its own tests do not pass at the commit: {', '.join(t for t, ok in after.items() if not ok)}"
        f2p = [t for t in ids if not before[t]]
        if not f2p:
            return None, "its tests did not fail before it"
        message = git(self.mirror, "log", "-1", "--format=%B", sha).out.strip()
        return self.make(sha, parents[0], message, test_patch, f2p, [t for t in ids if before[t]], code), ""

    def make(
        self, sha: str, parent: str, message: str, test_patch: str, f2p: list[str], p2p: list[str], code: list[str]
    ) -> Task:
        return Task(
            instance_id=f"{self.name}-{sha[:12]}",
            repo=self.name,
            url=self.url,
            base_commit=parent,
            problem_statement=message + "\n",
            test_patch=test_patch,
            fail_to_pass=tuple(f2p),
            pass_to_pass=tuple(p2p),
            setup=self.setup,
            test=self.test,
            patch=self.diff(parent, sha, code),
        )

    def diff(self, a: str, b: str, paths: list[str]) -> str:
        return git(self.mirror, "diff", "--binary", "--no-color", "--no-renames", a, b, "--", *paths).out

    def run(self, commit: str, patch: str, tests: list[str], name: str) -> dict[str, bool] | None:
        """{test: passed} at `commit` with `patch` applied, or None when that cannot be set up."""
        copy = self.scratch / "copy"
        shell = Shell(copy, self.scratch / "logs" / commit[:12] / name)
        try:
            checkout.fresh_copy(self.mirror, commit, copy)
            if self.setup and not shell.run("setup", self.setup).ok:
                return None
            checkout.apply(copy, patch, what="applying the test changes")
            return outcomes(shell, self.test, tests, "tests")
        except checkout.CheckoutError:
            return None
        finally:
            shutil.rmtree(copy, ignore_errors=True)
