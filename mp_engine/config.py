"""Configuration: `mp-engine.toml` plus `MP_ENGINE_<SECTION>__<KEY>` overrides.

Everything is validated by pydantic before any thread starts; an invalid value or an
unknown key is a `ConfigError` whose message names the key and where it came from.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mp_engine.errors import ConfigError
from mp_engine.workspace import CONFIG_FILE

ENV_PREFIX = "MP_ENGINE_"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EngineConfig(_Section):
    poll_interval: float = Field(2.0, gt=0, description="seconds between inbox rescans without an event")
    settle_seconds: float = Field(1.0, ge=0, description="size+mtime stable window before a file counts as complete")
    lock_timeout: float = Field(10.0, gt=0, description="seconds to wait for the workspace lock")
    max_mp_bytes: int = Field(1024 * 1024, gt=0, description="size cap of an MP file")
    events_max_bytes: int = Field(
        10 * 1024 * 1024, ge=0, description="size at which SYSTEM/.engine/events.jsonl is rotated (0 = never)"
    )
    events_keep: int = Field(5, ge=1, description="rotated event logs kept in SYSTEM/.engine/")
    disk_reserve_bytes: int = Field(
        1024 * 1024,
        ge=0,
        description="kept free in SYSTEM/.engine/reserve to record a result on a full disk (0 = none)",
    )


class WatchConfig(_Section):
    mode: Literal["auto", "native", "polling"] = "auto"
    polling_interval: float = Field(1.0, gt=0)
    health_interval: float = Field(
        2.0, gt=0, description="how often the daemon checks the observer is alive (default: with each rescan)"
    )
    stall_limit: float = Field(
        0.0, ge=0, description="exit non-zero when the main loop makes no progress this long (0 = off)"
    )


class ExecutionConfig(_Section):
    step_timeout: float = Field(600.0, gt=0)
    mp_timeout: float = Field(3600.0, gt=0)
    kill_grace: float = Field(5.0, ge=0, description="seconds between SIGTERM and SIGKILL of a step's group")
    output_cap_bytes: int = Field(16384, gt=0, description="bytes of each stream shown in RESULT_last.md")
    env_allow: tuple[str, ...] = ()
    shell: str = "bash"
    executor: Literal["shell", "agent"] = Field("shell", description="executor of MPs without an `Executor:` header")


class RecoveryConfig(_Section):
    interrupted_step: Literal["rerun", "report"] = "rerun"


class ArchiveConfig(_Section):
    """How many run archives are kept (SYSTEM/runs/), on the host and on the channel."""

    keep_runs: int = Field(200, ge=0, description="newest runs kept; older ones are pruned (0 = keep all)")
    max_bytes: int = Field(
        1024 * 1024 * 1024, ge=0, description="oldest runs are pruned while the archives are larger (0 = no cap)"
    )


class GitConfig(_Section):
    """The git channel (issue #3, docs/GIT.md). Off unless `enabled`."""

    enabled: bool = False
    remote: str = Field("origin", min_length=1, description="remote name, or a URL (kept as remote `origin`)")
    branch: str = Field("main", min_length=1)
    poll_interval: float = Field(10.0, gt=0, description="seconds between `git ls-remote` polls")
    heartbeat_interval: float = Field(
        300.0, ge=0, description="seconds between pushes to branch mp-engine/heartbeat (0 = off; docs/PROTOCOL.md)"
    )
    push: bool = True
    commit_running: bool = Field(True, description="commit and push right after RUNNING is written")
    timeout: float = Field(60.0, gt=0, description="seconds any one git command may take")
    push_attempts: int = Field(5, ge=1, description="push attempts when the remote moved in the meantime")
    push_backoff_max: float = Field(5.0, gt=0, description="cap of the jittered backoff between attempts")
    max_file_bytes: int = Field(1024 * 1024, ge=0, description="files above this size stay on the host (0 = no cap)")
    require_signed: bool = False
    allowed_signers: str = Field("", description="ssh allowed-signers file, outside the repository")
    allowed_gpg_keys: tuple[str, ...] = Field((), description="GPG fingerprints accepted as signers")
    platform_signers: tuple[str, ...] = Field(
        (), description='keys a forge signs with for its users: "github" (its web-flow key) or GPG fingerprints'
    )
    platform_keys: str = Field("", description="other platforms' public keys (GitHub's ships), outside the repository")
    allowed_authors: tuple[str, ...] = Field((), description="author e-mails a platform-signed commit may have")


class SecretsConfig(_Section):
    """What is masked in results, the run archive and the event log before a commit."""

    env: tuple[str, ...] = ()
    env_patterns: tuple[str, ...] = ("*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*API_KEY*", "*PRIVATE_KEY*")
    min_length: int = Field(8, ge=1, description="shorter values are not masked (too many false hits)")


class AgentLevel(_Section):
    """One level of the agent escalation chain (docs/AGENT.md)."""

    name: str = Field(min_length=1)
    argv: tuple[str, ...] = Field(
        (), description="command; placeholders {prompt} {prompt_file} {workspace} {mt_id} {evidence_dir} {ignore_file}"
    )
    hard_gate: bool = Field(False, description="stop here and wait for approval (last level only)")
    model: str = Field("", description="model id recorded in distillation candidates (default: name)")
    stdin: bool = Field(False, description="feed the prompt on stdin")
    timeout: float = Field(900.0, gt=0, description="seconds one agent call may take")
    idle_timeout: float = Field(300.0, gt=0, description="seconds without output before the call counts as hung")
    env_allow: tuple[str, ...] = Field((), description="environment variables passed to the agent")
    max_parallel: int | None = Field(
        None, ge=1, description="calls of this level at once in a parallel run (a local model may take one)"
    )

    @model_validator(mode="after")
    def _runnable(self) -> AgentLevel:
        if self.hard_gate:
            return self
        if not self.argv:
            raise ValueError(f"level {self.name!r} has no argv; give the agent command or set hard_gate = true")
        joined = " ".join(self.argv)
        if not self.stdin and "{prompt}" not in joined and "{prompt_file}" not in joined:
            raise ValueError(
                f"level {self.name!r} never passes the prompt; put {{prompt}} or {{prompt_file}} in argv or set stdin = true"
            )
        return self


def _check_chain(levels: tuple[AgentLevel, ...], where: str) -> None:
    names = [lv.name for lv in levels]
    if len(set(names)) != len(names):
        raise ValueError(f"{where}: level names must be unique, got {names}")
    gates = [i for i, lv in enumerate(levels) if lv.hard_gate]
    if gates and gates != [len(levels) - 1]:
        raise ValueError(f"{where}: hard_gate is allowed only once, as the last level")
    if gates and len(levels) == 1:
        raise ValueError(f"{where}: the chain needs at least one agent level before the hard gate")


class AgentRoute(_Section):
    """`[[agent.routes]]`: the micro-tasks tagged `[domain]` run on a chain of their own
    (issue #17); the others use `[agent] levels`."""

    domain: str = Field(pattern=r"^[A-Za-z][\w-]*$", description="the tag of a list item: `1. [docs] ...`")
    levels: tuple[AgentLevel, ...] = Field(min_length=1, description="this domain's escalation chain")

    @model_validator(mode="after")
    def _chain(self) -> AgentRoute:
        _check_chain(self.levels, f"route {self.domain!r}")
        return self


class AgentConfig(_Section):
    """The agent executor (issue #4, docs/AGENT.md). An empty chain means NEED_INFO."""

    levels: tuple[AgentLevel, ...] = ()
    routes: tuple[AgentRoute, ...] = Field((), description="chains for micro-tasks tagged with a domain")
    fail_threshold: int = Field(3, ge=1, description="failed iterations at a level before escalating")
    max_iterations: int = Field(30, ge=1, description="agent iterations per MP, all micro-tasks together")
    wall_budget: float = Field(3600.0, gt=0, description="active seconds per MP when it has no `Timeout:`")
    calls_per_hour: int = Field(100, ge=1, description="agent calls in any rolling hour, across restarts")
    require_checks: bool = Field(True, description="an agent MP without Validate checks ends in NEED_INFO")
    learnings_max_bytes: int = Field(16384, ge=1024, description="learnings file size that triggers compaction")
    output_tail_bytes: int = Field(2000, ge=100, description="tail of each failing check shown in the next prompt")
    token_budget: int = Field(
        8000, ge=0, description="estimated prompt tokens; the task's files and the repository map fill what is left"
    )
    max_no_progress: int = Field(3, ge=1)
    max_same_error: int = Field(5, ge=1)
    max_missing_status: int = Field(2, ge=1)
    max_test_only: int = Field(3, ge=1)
    divergence_window: int = Field(
        3, ge=2, description="residuals in a row, each above the one before, that mean divergence (Phuc's rule: 3)"
    )
    done_signals: int = Field(
        1, ge=1, description="iterations in a row an agent must claim a micro-task done (Loopr's done signals)"
    )
    transient_retries: int = Field(3, ge=0, description="retries of a call that hit a transient outage")
    transient_backoff: float = Field(10.0, ge=0, description="first backoff in seconds; doubles per retry")
    usage_limit_wait: float = Field(1800.0, gt=0, description="wait after a usage limit without a parsable reset")
    rate_limit_wait: float = Field(
        60.0, gt=0, description="wait after a rate limit (429, per minute) without a parsable reset"
    )
    plan: Literal["list", "auto"] = Field(
        "list", description="`auto`: the planner level plans every agent MP (an MP's `Plan:` header overrides)"
    )
    planner: AgentLevel | None = Field(None, description="`[agent.planner]`: the level that answers with a plan")
    reflector: AgentLevel | None = Field(
        None, description="`[agent.reflector]`: the level asked at each drift check whether the work serves the goal"
    )
    max_replans: int = Field(2, ge=0, description="re-plans per MP after a task exhausts its chain or drift is found")
    land: Literal["merge", "branch"] = Field(
        "merge", description="an EXACT run's work branch: merged into the channel branch, or left for review"
    )
    max_parallel: int = Field(
        1, ge=1, le=64, description="micro-tasks of one MP at once, each in its own worktree (1: one at a time)"
    )
    max_parallel_checks: int | None = Field(
        None, ge=1, description="checks running at once in a parallel run (default: the CPU count)"
    )
    max_integration_retries: int = Field(
        2, ge=0, description="integration failures (conflict, broken check) before a task is tried alone"
    )

    @model_validator(mode="after")
    def _chain(self) -> AgentConfig:
        _check_chain(self.levels, "[agent] levels")
        domains = [r.domain.lower() for r in self.routes]  # tags match without case
        if len(set(domains)) != len(domains):
            raise ValueError(f"route domains must be unique, got {domains}")
        for role in ("planner", "reflector"):
            lv = getattr(self, role)
            if lv is not None and lv.hard_gate:
                raise ValueError(f"[agent.{role}] must call an agent; a hard gate cannot plan or reflect")
        return self


class MetricsConfig(_Section):
    """Prometheus metrics over HTTP (issue #5). Off unless `listen` is set."""

    listen: str = Field("", description='"host:port" to serve /metrics on, e.g. "127.0.0.1:9464" (port 0: any free)')
    allow_remote: bool = Field(False, description="allow a non-loopback `listen` address")

    @model_validator(mode="after")
    def _loopback(self) -> MetricsConfig:
        if not self.listen:
            return self
        host, sep, port = self.listen.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError(f"listen must be HOST:PORT, got {self.listen!r}")
        if not self.allow_remote and not is_loopback(host):
            raise ValueError(
                f"listen = {self.listen!r} is not a loopback address; metrics carry no authentication. "
                "Use 127.0.0.1, or set allow_remote = true if a firewall guards the port"
            )
        return self

    @property
    def address(self) -> tuple[str, int]:
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]"), int(port)


class FleetConfig(_Section):
    """`[fleet]`: agent tasks run on workers through Temporal (docs/FLEET.md). Off unless
    `temporal` is set; without it nothing imports `temporalio`."""

    temporal: str = Field("", description='the Temporal frontend, "host:port" (e.g. "127.0.0.1:7233")')
    namespace: str = Field("default", min_length=1)
    task_queue: str = Field("mp-engine", min_length=1, description="the queue workers poll (`worker --task-queue`)")
    queues: dict[str, str] = Field(
        {}, description="agent level name -> task queue, for levels only some workers have (a GPU host)"
    )
    work_remote: str = Field("", description="the git URL workers clone and push to (default: the [git] remote)")
    heartbeat_timeout: float = Field(
        120.0, ge=2, description="seconds without a worker's heartbeat before its attempt goes to another worker"
    )
    max_tries: int = Field(5, ge=1, description="runs of one attempt when workers are lost or fail (not the agent)")
    connect_timeout: float = Field(10.0, gt=0, description="seconds to wait for Temporal at start")
    tls: bool = Field(False, description="TLS to Temporal (implied by tls_ca, tls_cert or api_key_env)")
    tls_ca: str = Field("", description="PEM file of the CA that signed the server's certificate")
    tls_cert: str = Field("", description="PEM client certificate (mTLS)")
    tls_key: str = Field("", description="PEM key of tls_cert (mTLS)")
    tls_server_name: str = ""
    api_key_env: str = Field("", description="environment variable holding a Temporal Cloud API key")
    payload_key_env: str = Field(
        "", description="environment variable holding a base64 AES-256 key: payloads are encrypted (AES-GCM)"
    )

    @model_validator(mode="after")
    def _address(self) -> FleetConfig:
        if self.temporal and not re.fullmatch(r"\[?[\w.:-]+\]?:\d{1,5}", self.temporal):
            raise ValueError(f'temporal must be "host:port", got {self.temporal!r}')
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("tls_cert and tls_key go together (mTLS)")
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.temporal)

    def queue_for(self, level_name: str) -> str:
        return self.queues.get(level_name, self.task_queue)


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (the metrics endpoint, `mp-engine mcp --http`)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Config(_Section):
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
