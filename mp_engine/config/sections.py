"""The engine's own sections: `[engine]`, `[watch]`, `[execution]`, `[recovery]`,
`[archive]`, `[git]`, `[secrets]` and `[metrics]`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from mp_engine.config.section import Section, is_loopback, listen_address


class EngineConfig(Section):
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


class WatchConfig(Section):
    mode: Literal["auto", "native", "polling"] = "auto"
    polling_interval: float = Field(1.0, gt=0)
    health_interval: float = Field(
        2.0, gt=0, description="how often the daemon checks the observer is alive (default: with each rescan)"
    )
    stall_limit: float = Field(
        0.0, ge=0, description="exit non-zero when the main loop makes no progress this long (0 = off)"
    )


class ExecutionConfig(Section):
    step_timeout: float = Field(600.0, gt=0)
    mp_timeout: float = Field(3600.0, gt=0)
    kill_grace: float = Field(5.0, ge=0, description="seconds between SIGTERM and SIGKILL of a step's group")
    output_cap_bytes: int = Field(16384, gt=0, description="bytes of each stream shown in RESULT_last.md")
    env_allow: tuple[str, ...] = ()
    shell: str = "bash"
    executor: Literal["shell", "agent"] = Field("shell", description="executor of MPs without an `Executor:` header")


class RecoveryConfig(Section):
    interrupted_step: Literal["rerun", "report"] = "rerun"


class ArchiveConfig(Section):
    """How many run archives are kept (SYSTEM/runs/), on the host and on the channel."""

    keep_runs: int = Field(200, ge=0, description="newest runs kept; older ones are pruned (0 = keep all)")
    max_bytes: int = Field(
        1024 * 1024 * 1024, ge=0, description="oldest runs are pruned while the archives are larger (0 = no cap)"
    )


class GitConfig(Section):
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
    refused_retry: float = Field(
        30.0, gt=0, description="seconds before a push the remote refused is tried again, doubling up to 30 min"
    )
    max_file_bytes: int = Field(1024 * 1024, ge=0, description="files above this size stay on the host (0 = no cap)")
    require_signed: bool = False
    allowed_signers: str = Field("", description="ssh allowed-signers file, outside the repository")
    allowed_gpg_keys: tuple[str, ...] = Field((), description="GPG fingerprints accepted as signers")
    platform_signers: tuple[str, ...] = Field(
        (), description='keys a forge signs with for its users: "github" (its web-flow key) or GPG fingerprints'
    )
    platform_keys: str = Field("", description="other platforms' public keys (GitHub's ships), outside the repository")
    allowed_authors: tuple[str, ...] = Field((), description="author e-mails a platform-signed commit may have")


class SecretsConfig(Section):
    """What is masked in results, the run archive and the event log before a commit."""

    env: tuple[str, ...] = ()
    env_patterns: tuple[str, ...] = ("*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*API_KEY*", "*PRIVATE_KEY*")
    min_length: int = Field(8, ge=1, description="shorter values are not masked (too many false hits)")


class MetricsConfig(Section):
    """Prometheus metrics over HTTP (issue #5). Off unless `listen` is set."""

    listen: str = Field("", description='"host:port" to serve /metrics on, e.g. "127.0.0.1:9464" (port 0: any free)')
    allow_remote: bool = Field(False, description="allow a non-loopback `listen` address")

    @model_validator(mode="after")
    def _loopback(self) -> MetricsConfig:
        if not self.listen:
            return self
        host, _ = listen_address(self.listen)
        if not self.allow_remote and not is_loopback(host):
            raise ValueError(
                f"listen = {self.listen!r} is not a loopback address; metrics carry no authentication. "
                "Use 127.0.0.1, or set allow_remote = true if a firewall guards the port"
            )
        return self

    @property
    def address(self) -> tuple[str, int]:
        return listen_address(self.listen)
