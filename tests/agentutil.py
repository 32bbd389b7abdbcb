"""Helpers for the agent executor's tests: fake agent levels, an `[agent]` section in the
workspace's mp-engine.toml, example MPs, and readers for the run archive."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mp_engine.record.archive import RunArchive
from mp_engine.workspace import Workspace
from tests.gitutil import git, toml_value

FAKE = Path(__file__).resolve().parent / "fake_agents"

GREET = """# MP-3.1 Greetings
Executor: agent

Create two greeting files.

1. Write "hello" to `out/a.txt`.
2. Write "bye" to `out/b.txt`.

## Validate

```bash
grep -qx hello out/a.txt
```

```bash
# MT-002
grep -qx bye out/b.txt
```
"""

ONE = """# MP-3.2 One file
Executor: agent

Write "hello" to `out/a.txt`. Keep it short.

## Validate

```bash
grep -qx hello out/a.txt
```
"""


def level(name: str, script: str, *args: str, prompt: str = "file", **opts: Any) -> dict[str, Any]:
    """A chain level running tests/fake_agents/<script> with the prompt as a file or text."""
    how = ["--prompt-file", "{prompt_file}"] if prompt == "file" else ["--prompt", "{prompt}"]
    return {"name": name, "argv": [str(FAKE / script), *how, *args], **opts}


GATE = {"name": "gate", "hard_gate": True}


def configure(ws: Workspace, levels: list[dict[str, Any]], *, git_repo: bool = True, **opts: Any) -> None:
    """Replace the template's [agent] section with these settings and levels; make the
    workspace a git repository with a first commit (an agent MP works on a branch) unless
    it is one already or `git_repo` is false."""
    text = ws.config_file.read_text()
    text = text[: text.index("[agent]")] if "[agent]" in text else text
    lines = ["[agent]", *(f"{k} = {toml_value(v)}" for k, v in opts.items())]
    for lv in levels:
        lines += ["", "[[agent.levels]]", *(f"{k} = {toml_value(v)}" for k, v in lv.items())]
    ws.config_file.write_text(text + "\n".join(lines) + "\n")
    if git_repo and not (ws.root / ".git").exists():
        for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "workspace"]):
            git(ws.root, *args)


def add_route(ws: Workspace, domain: str, *levels: dict[str, Any]) -> None:
    """Append an `[[agent.routes]]` entry (after `configure`)."""
    lines = ["", "[[agent.routes]]", f"domain = {toml_value(domain)}"]
    for lv in levels:
        lines += ["", "[[agent.routes.levels]]", *(f"{k} = {toml_value(v)}" for k, v in lv.items())]
    with ws.config_file.open("a") as f:
        f.write("\n".join(lines) + "\n")


def only_run(ws: Workspace) -> RunArchive:
    runs = sorted(p for p in ws.runs_dir.iterdir() if p.is_dir())
    assert len(runs) == 1, runs
    return RunArchive(runs[0])


def records(run: RunArchive) -> list[dict[str, Any]]:
    """The iteration records (ledger artifacts of `agent` steps), in order."""
    out = []
    for step in run.ledger().model.steps:
        if step.kind == "agent":
            path = run.steps_dir / f"{step.step_id}.exit.json"
            if path.exists():
                out.append(json.loads(path.read_text()))
    return out


def progress(run: RunArchive) -> dict[str, Any]:
    return json.loads((run.dir / "agent" / "progress.json").read_text())


def calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
