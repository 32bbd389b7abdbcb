"""Where a level's CLI will connect: the endpoint it is configured to use (issue #44).

In the sandbox (`[agent] sandbox = "os"`) an agent reaches only the hosts the rules allow.
A user who points a CLI at a gateway or a proxy (claude's `ANTHROPIC_BASE_URL`, codex's
provider `base_url`, aider's `OPENAI_API_BASE`) has said where it goes; the sandbox allows
that host too, so the configuration that works outside the sandbox works inside it.

Each source is a rule in `SOURCES`, read from what the call gets (its scrubbed environment,
its argv) and from the CLI's own configuration in the engine user's home. What the sandbox
allows must not be the agent's to widen: those configuration files are read-only inside it
(`Reach.protected`), although their directory is the CLI's writable state. What the
*workspace* says (claude's project settings, aider's `.env`) is anyone's who can push an MP:
it is never allowed, only named (`trusted = False`) when the sandbox refuses the call.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mp_engine.agent.call.presets import cli_of
from mp_engine.config.agent import AgentLevel

# Variables that carry the URL a CLI connects to, and the port a bare `host` means.
ENDPOINT_VARS: dict[str, int | None] = {
    "ANTHROPIC_BASE_URL": None,  # claude, and litellm (aider) for anthropic/ models
    "OPENAI_API_BASE": None,  # aider (litellm)
    "OPENAI_BASE_URL": None,  # the OpenAI SDKs
    "AIDER_OPENAI_API_BASE": None,  # aider's own name for --openai-api-base
    "OLLAMA_API_BASE": None,  # aider (litellm) to ollama
    "OLLAMA_HOST": 11434,  # `ollama run`
    "HTTPS_PROXY": None,  # a proxy: then the only host the CLI connects to
    "https_proxy": None,
    "HTTP_PROXY": None,
    "http_proxy": None,
    "ALL_PROXY": None,
    "all_proxy": None,
}
ARGV_OPTIONS = ("--openai-api-base",)  # aider's option for its endpoint
DOTENV_RE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_]\w*)\s*=\s*['\"]?([^'\"\s#]+)", re.M)


@dataclass(frozen=True)
class Endpoint:
    """A `host:port` the CLI is configured to reach, where that was said, and whether the
    sandbox may allow it (said by the engine's operator, not by the workspace)."""

    host: str
    source: str
    trusted: bool = True


@dataclass(frozen=True)
class Reach:
    """Everything found for one call: its endpoints, and the files they were read from that
    must stay read-only inside the sandbox."""

    endpoints: tuple[Endpoint, ...] = ()
    protected: tuple[Path, ...] = field(default=())

    def allowed(self) -> list[str]:
        return list(dict.fromkeys(e.host for e in self.endpoints if e.trusted))

    def named(self) -> list[Endpoint]:
        """What the workspace points the CLI at: never allowed, named when it is refused."""
        return [e for e in self.endpoints if not e.trusted]


def host_port(url: str, default_port: int | None = None) -> str | None:
    """`host:port` of a URL (`https://gw.example/v1` -> `gw.example:443`), or of a bare
    `host[:port]` when `default_port` says what a bare host means; None when it names none."""
    text = url.strip()
    if "://" not in text:
        if default_port is None:
            return None
        text = f"http://{text}"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    port = port or ({"https": 443, "http": 80}.get(parts.scheme) if "://" in url else default_port)
    if port is None:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port}"


def _vars(values: Mapping[str, Any], where: str, trusted: bool = True) -> list[Endpoint]:
    found = []
    for name, default_port in ENDPOINT_VARS.items():
        value = values.get(name)
        hp = host_port(value, default_port) if isinstance(value, str) and value.strip() else None
        if hp:
            found.append(Endpoint(hp, where.format(name=name), trusted))
    return found


def _environment(level: AgentLevel, env: Mapping[str, str], workdir: Path) -> list[Endpoint]:
    """What the call's environment says: a variable the level passes through (`env_allow`)."""
    return _vars(env, "{name} (the daemon's environment, passed through env_allow)")


def _argv(level: AgentLevel, env: Mapping[str, str], workdir: Path) -> list[Endpoint]:
    found = []
    for i, word in enumerate(level.argv):
        option, _, value = word.partition("=")
        if option in ARGV_OPTIONS:
            url = value or (level.argv[i + 1] if i + 1 < len(level.argv) else "")
            if hp := host_port(url):
                found.append(Endpoint(hp, f"{option} in the level's argv"))
    return found


def codex_config(env: Mapping[str, str]) -> Path:
    """codex's configuration file: `$CODEX_HOME/config.toml`, by default in `~/.codex`."""
    home = env.get("CODEX_HOME") or str(Path(env.get("HOME") or Path.home()) / ".codex")
    return Path(home) / "config.toml"


def _codex(level: AgentLevel, env: Mapping[str, str], workdir: Path) -> list[Endpoint]:
    """codex's provider (`model_provider`, or its profile's) and that provider's `base_url`, as
    its config file says with the level's argv overrides (`-c key=value`, `--profile NAME`)."""
    path = codex_config(env)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    said = _codex_overrides(level.argv, data)
    profile = _table(_table(data, "profiles"), str(data.get("profile")))
    name = profile.get("model_provider") or data.get("model_provider")
    url = _table(_table(data, "model_providers"), str(name)).get("base_url")
    hp = host_port(url) if isinstance(url, str) else None
    where = "the level's argv" if said else str(path)
    return [Endpoint(hp, f"{where} (model_providers.{name}.base_url)")] if hp else []


def _codex_overrides(argv: Sequence[str], data: dict[str, Any]) -> bool:
    """Apply codex's `-c key=value` (a dotted key, a TOML value or a bare string) and
    `-p/--profile NAME` from `argv` to `data`; whether any did."""
    said = False
    for i, word in enumerate(argv[1:], 1):
        value = argv[i + 1] if i + 1 < len(argv) else ""
        if word in ("-p", "--profile") and value:
            data["profile"], said = value, True
        elif word in ("-c", "--config") and "=" in value:
            key, _, raw = value.partition("=")
            try:
                parsed: Any = tomllib.loads(f"v = {raw}")["v"]
            except ValueError:
                parsed = raw
            *tables, leaf = [k.strip().strip('"') for k in key.split(".")]
            at = data
            for t in tables:
                at = at.setdefault(t, {}) if isinstance(at.get(t, {}), dict) else {}
            at[leaf], said = parsed, True
    return said


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


# Claude Code's managed settings on Linux, above every other settings file.
CLAUDE_MANAGED = Path("/etc/claude-code/managed-settings.json")


def claude_settings(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home()) / ".claude" / "settings.json"


def _settings_env(path: Path, trusted: bool) -> list[Endpoint]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    values = data.get("env") if isinstance(data, dict) else None
    return _vars(values, f"{{name}} in {path}", trusted) if isinstance(values, dict) else []


def _claude(level: AgentLevel, env: Mapping[str, str], workdir: Path) -> list[Endpoint]:
    """claude's managed settings (the host's administrator's: they win) and user settings
    (`env` in ~/.claude/settings.json: the engine user's)."""
    return [*_settings_env(CLAUDE_MANAGED, trusted=True), *_settings_env(claude_settings(env), trusted=True)]


def _workspace(level: AgentLevel, env: Mapping[str, str], workdir: Path) -> list[Endpoint]:
    """What the workspace tells the CLI: claude's project settings, aider's `.env`. Never
    trusted: whoever pushes an MP can write them."""
    cli = cli_of(level.argv[0]) if level.argv else None
    if cli == "claude":
        return [
            e
            for name in ("settings.json", "settings.local.json")
            for e in _settings_env(workdir / ".claude" / name, trusted=False)
        ]
    if cli == "aider":
        try:
            text = (workdir / ".env").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return []
        return _vars(dict(DOTENV_RE.findall(text)), f"{{name}} in the workspace's .env ({workdir / '.env'})", False)
    return []


Source = Callable[[AgentLevel, Mapping[str, str], Path], list[Endpoint]]
# Where an endpoint is said, in order; each CLI's own configuration only for that CLI.
SOURCES: list[tuple[str | None, Source]] = [
    (None, _environment),
    (None, _argv),
    ("codex", _codex),
    ("claude", _claude),
    (None, _workspace),
]
# The CLI's own configuration files an endpoint may come from: read-only in the sandbox.
PROTECTED: dict[str, Callable[[Mapping[str, str]], Path]] = {"codex": codex_config, "claude": claude_settings}


def reach(level: AgentLevel, env: Mapping[str, str], workdir: Path) -> Reach:
    """The endpoints `level`'s CLI is configured to reach when run with `env` in `workdir`."""
    cli = cli_of(level.argv[0]) if level.argv else None
    found: dict[tuple[str, bool], Endpoint] = {}
    for only, source in SOURCES:
        if only is None or only == cli:
            for e in source(level, env, workdir):
                found.setdefault((e.host, e.trusted), e)
    protected = (PROTECTED[cli](env),) if cli in PROTECTED else ()
    return Reach(tuple(found.values()), tuple(p for p in protected if p.is_file()))
