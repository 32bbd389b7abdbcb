"""The whole configuration (`Config`) and how it is loaded: `mp-engine.toml` plus
`MP_ENGINE_<SECTION>__<KEY>` overrides, with errors that name the key and its source."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ValidationError, field_validator, model_validator

from mp_engine.config.agent import AgentConfig
from mp_engine.config.dashboard import DashboardConfig
from mp_engine.config.diagnose import DiagnoseConfig
from mp_engine.config.fleet import FleetConfig
from mp_engine.config.notify import NotifyConfig
from mp_engine.config.repos import RepoConfig, check_repo_names
from mp_engine.config.section import Section
from mp_engine.config.sections import (
    ArchiveConfig,
    EngineConfig,
    ExecutionConfig,
    GitConfig,
    MetricsConfig,
    RecoveryConfig,
    SecretsConfig,
    WatchConfig,
)
from mp_engine.core.errors import ConfigError
from mp_engine.core.workspace import CONFIG_FILE, Workspace

ENV_PREFIX = "MP_ENGINE_"


class Config(Section):
    engine: EngineConfig = EngineConfig()
    watch: WatchConfig = WatchConfig()
    execution: ExecutionConfig = ExecutionConfig()
    recovery: RecoveryConfig = RecoveryConfig()
    archive: ArchiveConfig = ArchiveConfig()
    git: GitConfig = GitConfig()
    secrets: SecretsConfig = SecretsConfig()
    agent: AgentConfig = AgentConfig()
    metrics: MetricsConfig = MetricsConfig()
    fleet: FleetConfig = FleetConfig()
    notify: NotifyConfig = NotifyConfig()
    dashboard: DashboardConfig = DashboardConfig()
    diagnose: DiagnoseConfig = DiagnoseConfig()
    repos: dict[str, RepoConfig] = {}

    @field_validator("repos")
    @classmethod
    def _repo_names(cls, repos: dict[str, RepoConfig]) -> dict[str, RepoConfig]:
        return check_repo_names(repos)

    @model_validator(mode="after")
    def _tokens_stay_with_the_engine(self) -> Config:
        """A repository's token is the engine's: no step and no agent gets it (issue #41)."""
        agent = self.agent
        levels = [*agent.levels, *(lv for route in agent.routes for lv in route.levels), agent.planner, agent.reflector]
        given = {("[execution] env_allow", name) for name in self.execution.env_allow}
        given |= {
            (f"[agent] level {lv.name!r} env_allow", name) for lv in levels if lv is not None for name in lv.env_allow
        }
        for name, repo in self.repos.items():
            for where, var in sorted(given):
                if repo.token_env and var == repo.token_env:
                    raise ValueError(
                        f"{where} passes {var}, the token of [repos.{name}]; the token never reaches a step or an "
                        f"agent (the engine pushes and calls the forge itself): remove {var} from that env_allow"
                    )
        return self

    @property
    def secret_names(self) -> tuple[str, ...]:
        """The variables held out of the environment at start besides `[secrets]`
        patterns: `[secrets] env` and every `[repos.NAME] token_env`."""
        tokens = (repo.token_env for repo in self.repos.values() if repo.token_env)
        return tuple(dict.fromkeys((*self.secrets.env, *tokens)))

    @model_validator(mode="after")
    def _diagnose_level(self) -> Config:
        names = [lv.name for lv in self.agent.levels if not lv.hard_gate]
        if self.diagnose.level and self.diagnose.level not in names:
            raise ValueError(
                f"[diagnose] level = {self.diagnose.level!r} is not one of the [agent] levels "
                f"({', '.join(names) or 'none configured'}): name one of them, or leave it empty"
            )
        return self


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
    parts = list(loc[:-1])
    while parts:
        field = model.model_fields.get(str(parts.pop(0)))
        annotation = field.annotation if field is not None else None
        if get_origin(annotation) is dict:  # `[repos.NAME]`: a table of tables; NAME is no key
            annotation = get_args(annotation)[1]
            parts = parts[1:]
        if not isinstance(annotation, type) or not issubclass(annotation, BaseModel):
            return []
        model = annotation
    return sorted(model.model_fields)


def _describe(err: ValidationError, source: str, origin: dict[tuple[str, str], str]) -> str:
    lines = []
    for e in err.errors():
        loc = tuple(e["loc"])
        key = ".".join(str(p) for p in loc)
        where = origin.get((str(loc[0]), str(loc[1]))) if len(loc) >= 2 else None
        where = f"environment variable {where}" if where else source
        if e["type"] == "extra_forbidden":
            known = ", ".join(_known_keys(Config, loc)) or "(none)"
            lines.append(f"{key}: unknown key in {where}; known keys here: {known}")
        elif not loc:  # a rule across sections: its message names the keys
            lines.append(f"{e['msg'].removeprefix('Value error, ')} (in {where})")
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
                f"{path} is not valid TOML: {e}. Fix the syntax at that line (or move the file aside and run `mp-engine init` to write a fresh one)."
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


def load_workspace(root: Path) -> tuple[Workspace, Config]:
    """The workspace at `root` and its configuration, both checked completely."""
    ws = Workspace.at(root)
    ws.check()
    return ws, load_config(ws.root)
