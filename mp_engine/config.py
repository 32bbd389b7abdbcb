"""Configuration: `mp-engine.toml` plus `MP_ENGINE_<SECTION>__<KEY>` overrides.

Everything is validated by pydantic before any thread starts; an invalid value or an
unknown key is a `ConfigError` whose message names the key and where it came from.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mp_engine.errors import ConfigError

CONFIG_FILE = "mp-engine.toml"
ENV_PREFIX = "MP_ENGINE_"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EngineConfig(_Section):
    poll_interval: float = Field(2.0, gt=0, description="seconds between inbox rescans without an event")
    settle_seconds: float = Field(1.0, ge=0, description="size+mtime stable window before a file counts as complete")
    lock_timeout: float = Field(10.0, gt=0, description="seconds to wait for the workspace lock")
    max_mp_bytes: int = Field(1024 * 1024, gt=0, description="size cap of an MP file")


class WatchConfig(_Section):
    mode: Literal["auto", "native", "polling"] = "auto"
    polling_interval: float = Field(1.0, gt=0)
    health_interval: float = Field(
        2.0, gt=0, description="how often the daemon checks the observer is alive (default: with each rescan)"
    )


class ExecutionConfig(_Section):
    step_timeout: float = Field(600.0, gt=0)
    mp_timeout: float = Field(3600.0, gt=0)
    kill_grace: float = Field(5.0, ge=0, description="seconds between SIGTERM and SIGKILL of a step's group")
    output_cap_bytes: int = Field(16384, gt=0, description="bytes of each stream shown in RESULT_last.md")
    env_allow: tuple[str, ...] = ()
    shell: str = "bash"


class RecoveryConfig(_Section):
    interrupted_step: Literal["rerun", "report"] = "rerun"


class GitConfig(_Section):
    """The git channel (issue #3, docs/GIT.md). Off unless `enabled`."""

    enabled: bool = False
    remote: str = Field("origin", min_length=1, description="remote name, or a URL (kept as remote `origin`)")
    branch: str = Field("main", min_length=1)
    poll_interval: float = Field(10.0, gt=0, description="seconds between `git ls-remote` polls")
    push: bool = True
    commit_running: bool = Field(True, description="commit and push right after RUNNING is written")
    timeout: float = Field(60.0, gt=0, description="seconds any one git command may take")
    push_attempts: int = Field(5, ge=1, description="push attempts when the remote moved in the meantime")
    push_backoff_max: float = Field(5.0, gt=0, description="cap of the jittered backoff between attempts")
    require_signed: bool = False
    allowed_signers: str = Field("", description="ssh allowed-signers file, outside the repository")
    allowed_gpg_keys: tuple[str, ...] = Field((), description="GPG fingerprints accepted as signers")


class SecretsConfig(_Section):
    """What is masked in results, the run archive and the event log before a commit."""

    env: tuple[str, ...] = ()
    env_patterns: tuple[str, ...] = ("*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*API_KEY*", "*PRIVATE_KEY*")
    min_length: int = Field(8, ge=1, description="shorter values are not masked (too many false hits)")


class Config(_Section):
    engine: EngineConfig = EngineConfig()
    watch: WatchConfig = WatchConfig()
    execution: ExecutionConfig = ExecutionConfig()
    recovery: RecoveryConfig = RecoveryConfig()
    git: GitConfig = GitConfig()
    secrets: SecretsConfig = SecretsConfig()


def _coerce_env_value(raw: str) -> Any:
    """JSON when it parses (numbers, booleans, lists), the raw string otherwise."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _env_overrides(environ: Mapping[str, str]) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, str], str]]:
    overrides: dict[str, dict[str, Any]] = {}
    origin: dict[tuple[str, str], str] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        section, _, key = name[len(ENV_PREFIX) :].lower().partition("__")
        overrides.setdefault(section, {})[key] = _coerce_env_value(raw)
        origin[(section, key)] = name
    return overrides, origin


def _known_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        if field is None or not isinstance(field.annotation, type) or not issubclass(field.annotation, BaseModel):
            return []
        model = field.annotation
    return sorted(model.model_fields)


def _describe(err: ValidationError, source: str, origin: dict[tuple[str, str], str]) -> str:
    lines = []
    for e in err.errors():
        loc = tuple(e["loc"])
        key = ".".join(str(p) for p in loc)
        where = origin.get(tuple(str(p) for p in loc[:2])) if len(loc) >= 2 else None
        where = f"environment variable {where}" if where else source
        if e["type"] == "extra_forbidden":
            known = ", ".join(_known_keys(Config, loc)) or "(none)"
            lines.append(f"{key}: unknown key in {where}; known keys here: {known}")
        else:
            lines.append(f"{key}: {e['msg']} (got {e.get('input')!r}, from {where})")
    return "invalid configuration:\n  " + "\n  ".join(lines)


def load_config(root: Path, environ: Mapping[str, str] | None = None) -> Config:
    """Load `<root>/mp-engine.toml` (optional) and apply environment overrides."""
    environ = os.environ if environ is None else environ
    path = Path(root) / CONFIG_FILE
    data: dict[str, Any] = {}
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(
                f"{path} is not valid TOML: {e}. Fix the syntax or restore it with `mp-engine init`."
            ) from e
    overrides, origin = _env_overrides(environ)
    for section, values in overrides.items():
        if not isinstance(data.get(section, {}), dict):
            raise ConfigError(f"{path}: [{section}] must be a table")
        data.setdefault(section, {}).update(values)
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_describe(e, str(path), origin)) from e
