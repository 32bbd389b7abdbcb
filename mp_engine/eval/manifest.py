"""What an eval is (`eval.json`): its task set and its configurations, by digest. The first run
copies them into the eval directory; a later run of the same command resumes only when both
are still the same, since results judged under one configuration must not be reported under
another (issue #43: "the same command goes on")."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from mp_engine import __version__
from mp_engine.core.atomic import atomic_write_json
from mp_engine.core.clock import now_iso
from mp_engine.core.errors import ConfigError
from mp_engine.eval.layout import EvalDir
from mp_engine.eval.tasks import TaskSet


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def names(files: list[Path]) -> dict[str, Path]:
    """Each configuration file under a name: its stem (`cheap.toml`: cheap), numbered when two
    share one; `mp-engine.toml` is named after its directory."""
    named: dict[str, Path] = {}
    for f in files:
        stem = f.parent.name if f.name == "mp-engine.toml" and f.parent.name else f.stem
        name, n = stem, 2
        while name in named:
            name, n = f"{stem}-{n}", n + 1
        named[name] = f
    return named


def begin(out: EvalDir, tasks: TaskSet, configs: dict[str, Path]) -> dict[str, Any]:
    """Start the eval in `out`, or check that it is the one begun there; returns the manifest.
    The task set and the configurations are copied in on the first run."""
    wanted = {name: digest(path) for name, path in configs.items()}
    if out.manifest.exists():
        manifest: dict[str, Any] = json.loads(out.manifest.read_text(encoding="utf-8"))
        if manifest.get("tasks_sha256") != tasks.digest():
            raise ConfigError(
                f"{out.root} holds an eval of another task set (or the set changed since it began): give another --out "
                "to start a new eval, or the same task set to resume this one"
            )
        if manifest.get("configs") != wanted:
            raise ConfigError(
                f"{out.root} holds an eval of other configurations ({', '.join(manifest.get('configs') or {})}), or one "
                "changed since it began: give another --out for a new eval, or the same --config files to resume"
            )
        return manifest
    out.root.mkdir(parents=True, exist_ok=True)
    tasks.write(out.tasks)
    for name, path in configs.items():
        out.config(name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, out.config(name))
    manifest = {
        "schema": "mp-engine/eval/1",
        "task_set": tasks.name,
        "tasks": len(tasks.tasks),
        "tasks_sha256": tasks.digest(),
        "configs": wanted,
        "order": list(configs),  # the first is the baseline of every comparison
        "config_sources": {name: str(path) for name, path in configs.items()},
        "began_at": now_iso(),
        "engine": __version__,
    }
    atomic_write_json(out.manifest, manifest)
    return manifest
