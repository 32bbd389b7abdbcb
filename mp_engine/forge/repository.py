"""The configured repositories as a run uses them: each one's settings, its mirror and its
forge, built once at start (`open_repositories`), where a missing token or a missing
`[github]` extra stops the engine with the fix instead of failing a run later."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mp_engine.config.load import Config
from mp_engine.config.repos import RepoConfig
from mp_engine.core.errors import ConfigError
from mp_engine.forge.base import Forge
from mp_engine.forge.credentials import Token, token_for
from mp_engine.forge.mirror import RepoMirror

REPOS_DIR = "repos"  # under SYSTEM/.engine/


@dataclass(frozen=True)
class Repository:
    """One `[repos.NAME]`, ready for a run."""

    name: str
    config: RepoConfig
    mirror: RepoMirror
    forge: Forge | None  # None: forge = "none" (land by merge or branch only)

    def base(self, mp_base: str | None) -> str:
        """The branch work starts from and lands on: the MP's `Base:`, else `base`."""
        return mp_base or self.config.base

    @staticmethod
    def work_branch(mp_id: str) -> str:
        return f"mp/{mp_id}"

    def close(self) -> None:
        close = getattr(self.forge, "close", None)
        if close is not None:
            close()


def github_forge(name: str, repo: RepoConfig, token: Token | None) -> Forge:
    """`[repos.NAME]`'s GitHub forge; a `ConfigError` with the one fix when it cannot be."""
    if token is None:
        raise ConfigError(f"[repos.{name}] is on GitHub but names no token_env. Fix: set token_env.")
    try:
        import githubkit  # noqa: F401  (the [github] extra; github.py imports it where it is used)
    except ImportError as e:
        raise ConfigError(
            f"[repos.{name}] needs GitHub's client, which is not installed ({e}). Fix: pip install 'mp-engine[github]'."
        ) from e
    from mp_engine.forge.github import GitHubForge

    return GitHubForge(repo.slug, repo.api_root, token)


def open_repository(home: Path, name: str, repo: RepoConfig, environ: Mapping[str, str] | None = None) -> Repository:
    """`[repos.NAME]` with its mirror under `home` (SYSTEM/.engine/repos) and its forge."""
    token = token_for(name, repo, environ)
    forge = github_forge(name, repo, token) if repo.forge_kind == "github" else None
    return Repository(name, repo, RepoMirror(home, name, repo, token), forge)


def open_repositories(
    local_dir: Path, config: Config, environ: Mapping[str, str] | None = None
) -> dict[str, Repository]:
    """Every configured repository (`local_dir`: SYSTEM/.engine). Nothing is fetched yet:
    the first run on a repository makes its mirror."""
    return {name: open_repository(local_dir / REPOS_DIR, name, repo, environ) for name, repo in config.repos.items()}
