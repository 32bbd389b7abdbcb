"""A task set: SWE-bench-style JSONL (docs/EVAL.md, "The task-set format").

Each line is a JSON object. A **task** has `instance_id`, `repo`, `base_commit`,
`problem_statement`, `test_patch`, `FAIL_TO_PASS` and `PASS_TO_PASS` (lists, or JSON strings
of lists as the SWE-bench datasets hold them). A line without `instance_id` describes a
**repository**: `repo`, and its `url`, `setup`, `test` and `checks` (optionally only for one
`version`). A task may carry the same keys itself; its own win. Paths in `url` are relative to
the task set's file.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mp_engine.core.errors import ConfigError

ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
REPO_KEYS = ("url", "setup", "test", "checks")
PLACEHOLDERS = ("{tests}", "{test}")


class TaskSetError(ConfigError):
    """A task set cannot be read: the line and what to change."""


@dataclass(frozen=True)
class Task:
    """One task: the repository at its base commit, the goal, and what judges it."""

    instance_id: str
    repo: str
    url: str
    base_commit: str
    problem_statement: str
    test_patch: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...] = ()
    setup: str = ""
    test: str = ""
    checks: tuple[str, ...] = ()  # the agent's own checks: what the task set exposes to it
    patch: str = ""  # the reference solution, when the set has one (never shown to the agent)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Task:
        return cls(
            instance_id=data["instance_id"],
            repo=data["repo"],
            url=data["url"],
            base_commit=data["base_commit"],
            problem_statement=data["problem_statement"],
            test_patch=data["test_patch"],
            fail_to_pass=tuple(data["fail_to_pass"]),
            pass_to_pass=tuple(data.get("pass_to_pass") or ()),
            setup=data.get("setup") or "",
            test=data.get("test") or "",
            checks=tuple(data.get("checks") or ()),
            patch=data.get("patch") or "",
        )


@dataclass
class TaskSet:
    name: str
    tasks: list[Task] = field(default_factory=list)

    def digest(self) -> str:
        """What identifies the set for a resumed eval: every task as it will run."""
        text = "\n".join(json.dumps(t.to_json(), sort_keys=True) for t in self.tasks)
        return hashlib.sha256(text.encode()).hexdigest()

    def write(self, path: Path) -> None:
        from mp_engine.core.atomic import atomic_write

        atomic_write(path, "".join(json.dumps(t.to_json(), sort_keys=True) + "\n" for t in self.tasks))

    @classmethod
    def read(cls, path: Path, name: str) -> TaskSet:
        """A set written by `write` (the eval directory's own copy)."""
        lines = path.read_text(encoding="utf-8").splitlines()
        return cls(name, [Task.from_json(json.loads(line)) for line in lines if line.strip()])


def as_list(value: Any, what: str, where: str) -> tuple[str, ...]:
    """A list of strings, or a JSON string of one (how the SWE-bench datasets store them)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except ValueError:
            raise TaskSetError(
                f"{where}: {what} is a string that is not a JSON list: give a list of test names"
            ) from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TaskSetError(f"{where}: {what} must be a list of strings (test names), got {type(value).__name__}")
    return tuple(value)


def load_jsonl(path: Path) -> TaskSet:
    """The task set in `path`, every line checked; raises `TaskSetError` naming the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise TaskSetError(f"cannot read the task set {path}: {e.strerror or e}") from e
    rows: list[tuple[str, dict[str, Any]]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            raise TaskSetError(f"{path}:{number}: not a JSON object ({e}); each line is one task") from None
        if not isinstance(row, dict):
            raise TaskSetError(f"{path}:{number}: not a JSON object; each line is one task or one repository")
        rows.append((f"{path}:{number}", row))
    repos = {_repo_key(row, where): row for where, row in rows if "instance_id" not in row}
    tasks = [build(row, repos, where, path.parent) for where, row in rows if "instance_id" in row]
    if not tasks:
        raise TaskSetError(f"{path} holds no task (a line with an instance_id)")
    check_unique(tasks, str(path))
    return TaskSet(path.stem, tasks)


def _repo_key(row: Mapping[str, Any], where: str) -> tuple[str, str]:
    if not isinstance(row.get("repo"), str) or not row["repo"]:
        raise TaskSetError(f"{where}: a line without instance_id describes a repository and needs `repo`")
    return (row["repo"], str(row.get("version") or ""))


def build(row: Mapping[str, Any], repos: Mapping[tuple[str, str], Mapping[str, Any]], where: str, base: Path) -> Task:
    """One task line, with its repository's keys filled in."""
    for key in ("instance_id", "repo", "base_commit", "problem_statement", "test_patch"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise TaskSetError(f"{where}: `{key}` is missing or empty (a task needs {key})")
    iid, repo = row["instance_id"], row["repo"]
    if not ID_RE.match(iid):
        raise TaskSetError(f"{where}: instance_id {iid!r} must be letters, digits, `.`, `_`, `-` (at most 128)")
    version = str(row.get("version") or "")
    spec = {**repos.get((repo, ""), {}), **(repos.get((repo, version), {}) if version else {})}
    merged = {k: row[k] if k in row else spec.get(k) for k in REPO_KEYS}
    test = merged["test"] or ""
    if not any(p in test for p in PLACEHOLDERS):
        raise TaskSetError(
            f"{where}: the repository {repo!r} has no test command with {{tests}} or {{test}}: add a line "
            f'{{"repo": "{repo}", "test": "python -m pytest -q {{tests}}"}} (or `test` on the task)'
        )
    f2p = as_list(row.get("FAIL_TO_PASS", row.get("fail_to_pass")), "FAIL_TO_PASS", where)
    if not f2p:
        raise TaskSetError(f"{where}: FAIL_TO_PASS is empty: a task needs a test that its fix makes pass")
    return Task(
        instance_id=iid,
        repo=repo,
        url=resolve_url(merged["url"] or f"https://github.com/{repo}.git", base),
        base_commit=row["base_commit"].strip(),
        problem_statement=row["problem_statement"],
        test_patch=row["test_patch"],
        fail_to_pass=f2p,
        pass_to_pass=as_list(row.get("PASS_TO_PASS", row.get("pass_to_pass", [])), "PASS_TO_PASS", where),
        setup=merged["setup"] or "",
        test=test,
        checks=as_list(merged["checks"] or [], "checks", where),
        patch=str(row.get("patch") or ""),
    )


def resolve_url(url: str, base: Path) -> str:
    """A URL as given, or a local path made absolute against the task set's directory."""
    if "://" in url or re.match(r"^[\w.-]+@[\w.-]+:", url):
        return url
    return str((base / url).resolve())


def check_unique(tasks: Iterable[Task], where: str) -> None:
    seen: set[str] = set()
    for t in tasks:
        if t.instance_id in seen:
            raise TaskSetError(f"{where}: instance_id {t.instance_id!r} appears twice; each task needs its own")
        seen.add(t.instance_id)
