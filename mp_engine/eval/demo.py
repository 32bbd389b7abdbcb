"""The demo set (`mp-engine eval --demo`): a few tiny repositories with a real bug each,
shipped with mp-engine so an eval runs anywhere with only python3, bash and git.

Each task is one TOML file in `demoset/`: the repository's files at the base commit
(`[files]`), the judging tests as the test patch makes them (`[hidden]`) and a reference fix
(`[fix]`, never shown to the agent). The repositories are built in the eval directory with a
fixed author and date, so every machine gets the same commit ids.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from mp_engine.core.gitcmd import git
from mp_engine.eval.checkout import commit_all
from mp_engine.eval.tasks import Task, TaskSet

WHEN = "2024-01-01T00:00:00+00:00"
EXECUTABLE = ("count-lines",)


def specs() -> list[dict[str, Any]]:
    """The demo tasks as their files say, in name order."""
    folder = resources.files("mp_engine.eval").joinpath("demoset")
    found = sorted((f for f in folder.iterdir() if f.name.endswith(".toml")), key=lambda f: f.name)
    return [tomllib.loads(f.read_text(encoding="utf-8")) for f in found]


def demo_set(where: Path) -> TaskSet:
    """The demo set, its repositories built under `where` (once: kept for a resumed eval)."""
    return TaskSet("demo", [build(spec, where / spec["instance_id"]) for spec in specs()])


def build(spec: dict[str, Any], repo: Path) -> Task:
    """The task of `spec`, its repository at `repo` (made unless it is there already)."""
    if not (repo / ".git").exists():
        tmp = repo.with_name(repo.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        git(tmp, "init", "--quiet", "-b", "main")
        write(tmp, spec["files"])
        commit_all(tmp, f"{spec['repo']}: the code as it was", when=WHEN)
        os.replace(tmp, repo)
    base = git(repo, "rev-parse", "HEAD").out.strip()
    return Task(
        instance_id=spec["instance_id"],
        repo=spec["repo"],
        url=str(repo),
        base_commit=base,
        problem_statement=spec["problem_statement"].strip() + "\n",
        test_patch=overlay(repo, spec["hidden"]),
        fail_to_pass=tuple(spec["FAIL_TO_PASS"]),
        pass_to_pass=tuple(spec.get("PASS_TO_PASS") or ()),
        setup=spec.get("setup", ""),
        test=spec["test"],
        checks=tuple(spec.get("checks") or ()),
        patch=overlay(repo, spec["fix"]),
    )


def write(repo: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if name in EXECUTABLE:
            path.chmod(0o755)


def overlay(repo: Path, files: dict[str, str]) -> str:
    """The patch that turns the base into the base with `files` written over it (computed by
    git in the repository, which is left as it was)."""
    try:
        write(repo, files)
        git(repo, "add", "--intent-to-add", "--", *files)
        return git(repo, "diff", "--binary", "--no-color", "HEAD", "--", *files).out
    finally:
        git(repo, "reset", "--quiet", "--hard", "HEAD")
        git(repo, "clean", "--quiet", "-fd", "--", *files)
