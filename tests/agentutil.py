"""Helpers for the agent executor's tests: fake agent levels, an `[agent]` section in the
workspace's mp-engine.toml, example MPs, and readers for the run archive."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from mp_engine.agent.call.limiter import CallLimiter
from mp_engine.agent.run.steps import AgentSteps
from mp_engine.agent.scope import RunScope
from mp_engine.config.load import load_config
from mp_engine.core.events import EventLog
from mp_engine.core.workspace import Workspace
from mp_engine.execute.steps import StepContext, TimeBudget
from mp_engine.inbox.mpfile import parse
from mp_engine.record.archive import RunArchive, create_run
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

# A planned agent MP (issue #17): the planner level plans its tasks.
PLANNED = """# MP-4.1 Greeting files, planned
Executor: agent
Plan: auto

Create the greeting files the checks ask for.

## Validate

```bash
grep -qx hello out/a.txt
```

```bash
grep -qx bye out/b.txt
```
"""


def level(name: str, script: str, *args: str, prompt: str = "file", **opts: Any) -> dict[str, Any]:
    """A chain level running tests/fake_agents/<script> with the prompt as a file or text."""
    how = ["--prompt-file", "{prompt_file}"] if prompt == "file" else ["--prompt", "{prompt}"]
    return {"name": name, "argv": [str(FAKE / script), *how, *args], **opts}


GATE = {"name": "gate", "hard_gate": True}


def configure(
    ws: Workspace,
    levels: list[dict[str, Any]],
    *,
    git_repo: bool = True,
    planner: dict[str, Any] | None = None,
    reflector: dict[str, Any] | None = None,
    reviewer: dict[str, Any] | None = None,
    **opts: Any,
) -> None:
    """Replace the template's [agent] section with these settings and levels (and a
    planner, reflector and reviewer level); make the workspace a git repository with a first commit
    (an agent MP works on a branch) unless it is one already or `git_repo` is false."""
    text = ws.config_file.read_text()
    text = text[: text.index("[agent]")] if "[agent]" in text else text
    lines = ["[agent]", *(f"{k} = {toml_value(v)}" for k, v in opts.items())]
    for lv in levels:
        lines += ["", "[[agent.levels]]", *(f"{k} = {toml_value(v)}" for k, v in lv.items())]
    for role, lv in (("planner", planner), ("reflector", reflector), ("reviewer", reviewer)):
        if lv is not None:
            lines += ["", f"[agent.{role}]", *(f"{k} = {toml_value(v)}" for k, v in lv.items())]
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


def planner(answers: Path, *plans: Any, **opts: Any) -> dict[str, Any]:
    """A planner level (tests/fake_agents/planner.py) whose n-th answer is `plans[n-1]`
    (a dict as JSON, or a string as written)."""
    answers.mkdir(parents=True, exist_ok=True)
    for n, plan in enumerate(plans, 1):
        (answers / f"{n}.json").write_text(plan if isinstance(plan, str) else json.dumps(plan))
    return level("planner", "planner.py", "--answers", str(answers), **opts)


def task(ref: str, *writes: tuple[str, str], checks=("check-001",), after=(), **more: Any) -> dict[str, Any]:
    """One task of a plan: its description holds the writes the fake workers understand."""
    desc = " ".join(f'Write "{text}" to `{path}`.' for text, path in writes)
    return {
        "id": ref,
        "title": f"task {ref}",
        "description": desc,
        "depends_on": list(after),
        "checks": list(checks),
        **more,
    }


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


def agent_context(ws: Workspace, text: str, levels: list[dict[str, Any]], **opts: Any) -> StepContext:
    """A claimed agent MP's StepContext (a run and its ledger), for the agent run's parts
    tested alone: the workspace configured with `levels` (a git repository)."""
    configure(ws, levels, **opts)
    config = load_config(ws.root)
    data = text.encode()
    mp = parse(data)
    run, ledger = create_run(ws, mp_id=mp.mp_id, data=data, mp_sha256=mp.sha256, executor="agent")
    return StepContext(
        ws=ws,
        config=config,
        run=run,
        ledger=ledger,
        mp=mp,
        events=EventLog(ws.events_file),
        stop=threading.Event(),
        stop_now=threading.Event(),
        budget=TimeBudget.of(mp, (config.agent.wall_budget, "wall_budget")),
    )


def run_scope(ctx: StepContext, events: list | None = None, *, nonce: str = "n0nce", per_hour: int = 100) -> RunScope:
    """The scope of an agent run for its parts tested alone; `events` gets each event of it
    as (name, fields) (fields without the MP and run ids, and the event id)."""
    if events is not None:

        def seen(rec: dict[str, Any]) -> None:
            fields = {k: v for k, v in rec.items() if k not in ("ts", "event", "id", "mp", "run")}
            events.append((rec["event"], fields))

        ctx.events.listeners.append(seen)
    limiter = CallLimiter(ctx.ws.local_dir / "calls.log", per_hour)
    steps = AgentSteps(ctx.ledger, ctx.run.steps_dir)
    return RunScope(ctx, ctx.config.agent, nonce, steps, limiter, ctx.run.dir / "agent" / "learnings.md")
