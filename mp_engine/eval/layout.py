"""The eval directory (`--out`): one value names every path in it, as `Workspace` does for a
workspace, so no other module builds one by hand.

    eval.json               what this eval is: the task set's digest, each configuration's
    tasks.jsonl             the tasks as they run (the judging tests are here: never shown)
    configs/NAME/mp-engine.toml   each configuration, copied at the start
    repos/NAME.git          one mirror per repository
    probe/ID.json, ID/      the environment's probe of each task (and its logs)
    runs/CONFIG/ID/         the eval's record of one task under one configuration: its
                            `once` attempts, the agent's patch, the logs, the judging copy
                            (made after the run, dropped once judged)
    results.jsonl           one line per judged task and configuration
    report.json, report.md, report.html
    work/CONFIG/ID/         the agent's workspace: the run archived in its SYSTEM/runs/

The workspaces have a tree of their own: the sandbox hides everything else of the eval
from an agent (`hidden`), and it can only hide a directory that does not hold the workspace.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

SAFE_RE = re.compile(r"[^A-Za-z0-9._-]")


def safe(name: str) -> str:
    """A repository's or a configuration's name as one directory name."""
    return SAFE_RE.sub("_", name).strip("._") or "_"


class EvalDir:
    __slots__ = ("root",)

    def __init__(self, root: Path):
        self.root = Path(root).absolute()

    @property
    def manifest(self) -> Path:
        return self.root / "eval.json"

    @property
    def lock(self) -> Path:
        return self.root / "eval.lock"

    @property
    def tasks(self) -> Path:
        return self.root / "tasks.jsonl"

    @property
    def results(self) -> Path:
        return self.root / "results.jsonl"

    def config(self, name: str) -> Path:
        return self.root / "configs" / safe(name) / "mp-engine.toml"

    def mirror(self, repo: str) -> Path:
        return self.root / "repos" / f"{safe(repo)}.git"

    def probe(self, iid: str) -> Path:
        return self.root / "probe" / f"{iid}.json"

    def probe_dir(self, iid: str) -> Path:
        return self.root / "probe" / iid

    def run_dir(self, config: str, iid: str) -> Path:
        return self.root / "runs" / safe(config) / iid

    def workspace(self, config: str, iid: str) -> Path:
        return self.root / "work" / safe(config) / iid

    def hidden(self, config: str, iid: str, configs: Sequence[str]) -> list[Path]:
        """What an agent working on `iid` under `config` must not see: every entry of the eval
        directory but the workspaces (the judging tests, the probe's logs, the mirrors with
        their later history, the other runs' patches), and the same task's workspace under
        each other configuration (its work may be a solution)."""
        own = self.root / "work"
        entries = [p for p in sorted(self.root.iterdir()) if p != own] if self.root.is_dir() else []
        return entries + [self.workspace(c, iid) for c in configs if c != config]

    def prepared(self, config: str, iid: str) -> Path:
        return self.run_dir(config, iid) / "prepared.json"

    def judge_dir(self, config: str, iid: str) -> Path:
        return self.run_dir(config, iid) / "judge"

    def logs(self, config: str, iid: str) -> Path:
        return self.run_dir(config, iid) / "logs"

    def report(self, suffix: str) -> Path:
        return self.root / f"report.{suffix}"
