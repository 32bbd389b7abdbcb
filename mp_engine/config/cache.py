"""The configuration as read-only commands see it: validated once per version of what it
is built from.

`status` is polled by scripts (bench figure 8: at most 3x `python -c pass`), and
pydantic's import alone costs more than that. The SHA-256 of `mp-engine.toml`'s bytes and
of the `MP_ENGINE_*` variables keys `SYSTEM/.engine/config.json`, which holds the
validated configuration as JSON, or the validation error (naming the key) with the
defaults: only the first read after a change validates (`config.load_config`), every
later one parses one small JSON file.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mp_engine.core.atomic import atomic_write_json
from mp_engine.core.workspace import CONFIG_FILE, Workspace

if TYPE_CHECKING:
    from mp_engine.config.load import Config

CACHE_FILE = "config.json"
SCHEMA = 1


def digest(root: Path, environ: Mapping[str, str]) -> str:
    h = hashlib.sha256()
    try:
        h.update(Path(root, CONFIG_FILE).read_bytes())
    except FileNotFoundError:
        h.update(b"\0absent")
    except OSError as e:
        h.update(f"\0unreadable {e.errno}".encode())
    for name in sorted(n for n in environ if n.startswith("MP_ENGINE_")):
        h.update(f"\0{name}={environ[name]}".encode())
    return h.hexdigest()


def read(root: Path, local_dir: Path, environ: Mapping[str, str] | None = None) -> tuple[dict[str, Any], str | None]:
    """The configuration as JSON (`Config.model_dump(mode="json")`), and the error that
    made the defaults stand in, or None."""
    environ = os.environ if environ is None else environ
    key = digest(root, environ)
    cache = Path(local_dir) / CACHE_FILE
    try:
        cached = json.loads(cache.read_text(encoding="utf-8"))
        if cached.get("schema") == SCHEMA and cached.get("digest") == key:
            return cached["config"], cached["error"]
    except (OSError, ValueError, AttributeError, KeyError):
        pass
    from mp_engine.config.load import Config, load_config  # the slow path: pydantic
    from mp_engine.core.errors import ConfigError

    try:
        config, error = load_config(Path(root), environ), None
    except ConfigError as e:
        config, error = Config(), " ".join(str(e).split())
    data = config.model_dump(mode="json")
    try:
        atomic_write_json(cache, {"schema": SCHEMA, "digest": key, "config": data, "error": error}, durable=False)
    except OSError:
        pass  # a read-only workspace: validate every time
    return data, error


def load_for_reading(root: Path) -> tuple[Workspace, Config, str | None]:
    """For read-only commands (`logs`): a configuration error must not blind the
    operator, so the defaults stand in and the error comes back as a warning to show."""
    from mp_engine.config.load import Config

    ws = Workspace.at(root)
    ws.check()
    data, error = read(ws.root, ws.local_dir)
    return ws, Config.model_validate(data), error
