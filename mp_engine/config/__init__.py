"""Configuration: `mp-engine.toml` plus `MP_ENGINE_<SECTION>__<KEY>` overrides.

Everything is validated by pydantic before any thread starts; an invalid value or an
unknown key is a `ConfigError` whose message names the key and where it came from.

The sections live beside this file (`sections.py`, `agent.py`, `fleet.py`, `notify.py`,
`dashboard.py`, `diagnose.py`, `repos.py`);
`load.py` holds `Config` and `load_config`. Everything is importable from here.
"""

from __future__ import annotations

from mp_engine.config.agent import AgentConfig, AgentLevel, AgentRoute
from mp_engine.config.dashboard import DashboardConfig
from mp_engine.config.diagnose import DiagnoseConfig
from mp_engine.config.fleet import FleetConfig
from mp_engine.config.load import ENV_PREFIX, Config, load_config
from mp_engine.config.notify import ALERT_KINDS, NotifyConfig
from mp_engine.config.repos import RepoConfig
from mp_engine.config.section import is_loopback
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
from mp_engine.core.workspace import CONFIG_FILE

__all__ = [
    "ALERT_KINDS",
    "DashboardConfig",
    "DiagnoseConfig",
    "CONFIG_FILE",
    "ENV_PREFIX",
    "AgentConfig",
    "AgentLevel",
    "AgentRoute",
    "ArchiveConfig",
    "Config",
    "EngineConfig",
    "ExecutionConfig",
    "FleetConfig",
    "GitConfig",
    "MetricsConfig",
    "NotifyConfig",
    "RecoveryConfig",
    "RepoConfig",
    "SecretsConfig",
    "WatchConfig",
    "is_loopback",
    "load_config",
]
