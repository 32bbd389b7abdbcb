"""Real-git helpers for the sync tests: a bare remote, an engine workspace cloned from it,
and an orchestrator clone that pushes MPs the way ChatGPT (or a person) would."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from mp_engine.config.load import load_config
from mp_engine.core.workspace import Workspace
from mp_engine.pipeline.engine import Engine
from mp_engine.sync.redact import Redactor
from mp_engine.sync.setup import enable_git_config, setup_remote

HELLO = """# MP-0.1 Hello over git

```file hello/greeting.txt
Hello from mp-engine.
```

```bash
echo "MP $MP_ID ran"
```

## Validate

```bash
grep -q Hello hello/greeting.txt
```
"""

FAILING = """# MP-0.2 Fails on purpose

```bash
no-such-command --version
```
"""


def git(cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=60
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout.strip()


def make_remote(tmp_path: Path, name: str = "remote.git") -> Path:
    bare = tmp_path / name
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(bare)], check=True)
    return bare


def engine_workspace(tmp_path: Path, url: str, name: str = "engine", **git_settings: object) -> Workspace:
    root = tmp_path / name
    setup_remote(root, url, "main")
    text = (root / "mp-engine.toml").read_text()
    for key, value in git_settings.items():
        line = f"{key} = {toml_value(value)}"
        pattern = re.compile(rf"^{key} = .*$", re.M)
        text = (
            pattern.sub(line, text, count=1) if pattern.search(text) else text.replace("[git]\n", f"[git]\n{line}\n", 1)
        )
    (root / "mp-engine.toml").write_text(text)
    enable_git_config(root / "mp-engine.toml", "origin", "main")
    return Workspace.at(root)


def toml_value(v: object) -> str:
    """A Python value as a TOML value (for test configurations)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return json.dumps(str(v))  # a TOML basic string is a JSON string


def make_engine(ws: Workspace) -> Engine:
    config = load_config(ws.root)
    redact = Redactor.from_config(config)
    engine = Engine(ws, config, redact=redact, git=True)
    engine.start(daemon=False)
    return engine


def sync_tick(engine: Engine):
    """One tick with the git poll forced due (tests do not wait for the poll interval)."""
    assert engine.sync is not None
    engine.sync._next_poll = 0.0
    return engine.tick()


def clone(url: str, dest: Path) -> Path:
    subprocess.run(["git", "clone", "--quiet", url, str(dest)], check=True, capture_output=True)
    return dest


def push_file(repo: Path, rel: str, text: str, message: str, *, sign: bool = False) -> str:
    """Commit `text` as `rel` and push it, as an orchestrator does: the engine pushes too
    (its start, its results), so a rejected push is rebased on the remote and pushed again."""
    git(repo, "pull", "--quiet", "--ff-only", check=False)
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    git(repo, "add", "--", rel)
    git(repo, "commit", "--quiet", *(["-S"] if sign else []), "-m", message)
    for _ in range(10):
        if (
            not git(repo, "push", "--quiet", "origin", "HEAD:main", check=False)
            and git(repo, "rev-parse", "HEAD") == git(repo, "ls-remote", "origin", "refs/heads/main").split("\t")[0]
        ):
            break
        git(repo, "pull", "--quiet", "--rebase", *(["-S"] if sign else []), "origin", "main")
    return git(repo, "rev-parse", "HEAD")


def push_mp(repo: Path, text: str, *, sign: bool = False) -> str:
    return push_file(repo, "Claude_Inbox/incoming_microproject.txt", text, "send MP", sign=sign)


def remote_file(bare: Path, path: str, ref: str = "main") -> str | None:
    proc = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=bare, capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


def remote_log(bare: Path, ref: str = "main") -> list[str]:
    return git(bare, "log", "--format=%s", ref).splitlines()
