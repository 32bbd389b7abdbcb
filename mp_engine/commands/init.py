"""`mp-engine init [--remote URL] [--agent NAME ...] DIRECTORY`."""

from __future__ import annotations

import itertools
import re
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path

from mp_engine.agent.api import PRESETS, chain
from mp_engine.core.atomic import atomic_write
from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.workspace import CONFIG_FILE, init_workspace
from mp_engine.execute.sandbox import problem as sandbox_problem
from mp_engine.sync.setup import setup_remote

LEVELS_RE = re.compile(r"^\[\[agent\.levels\]\]", re.M)  # a level written out, not a comment
PARALLEL_RE = re.compile(r"^max_parallel = 1$", re.M)  # [agent]'s, as the template writes it
SANDBOX_RE = re.compile(r'^sandbox = "none"$', re.M)
INIT_PARALLEL = 3


def init(
    directory: Path, remote: str | None, branch: str, echo: Callable[[str], None], agents: Sequence[str] = ()
) -> ExitCode:
    unknown = [a for a in agents if a not in PRESETS]
    if unknown:
        named = [a for a in unknown if a]
        echo(f"mp-engine init: no agent preset {', '.join(named)}" if named else "mp-engine init: --agent needs a name")
        for line in presets_listing():
            echo(line)
        return ExitCode.USAGE
    if remote:
        for line in setup_remote(directory, remote, branch):
            echo(line)
    else:
        ws, created = init_workspace(directory)
        if created:
            echo(f"initialised mp-engine workspace {ws.root}")
            for path in created:
                echo(f"  created {path}")
        elif not agents:
            echo(f"{ws.root} is already an mp-engine workspace; nothing changed")
    if agents:
        add_agents(Path(directory) / CONFIG_FILE, agents, echo)
        if remote:
            echo(f"commit and push {CONFIG_FILE} so the channel carries the agent chain too")
    return ExitCode.OK


def presets_listing() -> list[str]:
    """The presets `--agent` takes, each with the command it runs, and an example."""
    width = max(map(len, PRESETS))
    lines = ["the presets (docs/AGENT.md); repeat --agent for a chain, the cheapest first:"]
    for name, table in PRESETS.items():
        argv = tomllib.loads(table)["agent"]["levels"][0]["argv"]
        words = list(itertools.takewhile(lambda w: not w.startswith("-"), argv))
        lines.append(f"  {name:<{width}}  runs `{' '.join(words)}`")
    lines.append("for example: mp-engine init --agent aider --agent claude DIR")
    return lines


def add_agents(config: Path, agents: Sequence[str], echo: Callable[[str], None]) -> None:
    """Append the presets' chain to mp-engine.toml's [agent] section (the last one in the
    file), unless the file has levels already: then it says so and changes nothing."""
    text = config.read_text(encoding="utf-8")
    if LEVELS_RE.search(text):
        echo(f"{config} already has [[agent.levels]]; left as it is (docs/AGENT.md shows each preset)")
        return
    added = f"\n# Written by `mp-engine init --agent {' --agent '.join(agents)}` (docs/AGENT.md).\n" + chain(agents)
    # Agents spend most of a call waiting on a model: a few tasks at once (docs/AGENT.md).
    text = PARALLEL_RE.sub(f"max_parallel = {INIT_PARALLEL}", text, count=1)
    why = sandbox_problem()  # agents sandboxed wherever bubblewrap works (docs/AGENT.md, "The sandbox")
    if why is None:
        text = SANDBOX_RE.sub('sandbox = "os"', text, count=1)
    atomic_write(config, text.rstrip("\n") + "\n" + added)
    echo(f"added the agent chain {' -> '.join([*agents, 'person (hard gate)'])} to {config}")
    if why is None:
        echo('agents run in the sandbox ([agent] sandbox = "os"); `mp-engine doctor` tests it')
    else:
        echo(f"agents run unsandboxed: {why}")
