"""The eval directory (`--out`): one value names every path in it, as `Workspace` does for a
workspace, so no other module builds one by hand.

    eval.json               what this eval is: the task set's digest, each configuration's
    tasks.jsonl             the tasks as they run (the judging tests are here: never shown)
    configs/NAME/mp-engine.toml   each configuration, copied at the start
    repos/NAME.git          one mirror per repository
    probe/ID.json, ID/      the environment's probe of each task (and its logs)
    runs/CONFIG/ID/ws/      the agent's workspace: the run archived in ws/SYSTEM/runs/
    runs/CONFIG/ID/judge/   the judging copy, made after the run, dropped once judged
    runs/CONFIG/ID/logs/    `once`'s output, the judge's commands' output
    results.jsonl           one line per judged task and configuration
    report.json, report.md, report.html
"""

from __future__ import annotations

import re
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
        return self.run_dir(config, iid) / "ws"

    def prepared(self, config: str, iid: str) -> Path:
        return self.run_dir(config, iid) / "prepared.json"

    def judge_dir(self, config: str, iid: str) -> Path:
        return self.run_dir(config, iid) / "judge"

    def logs(self, config: str, iid: str) -> Path:
        return self.run_dir(config, iid) / "logs"

    def report(self, suffix: str) -> Path:
        return self.root / f"report.{suffix}"
