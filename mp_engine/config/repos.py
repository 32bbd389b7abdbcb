"""`[repos.NAME]`: repositories beyond the channel that agent MPs may work on (issue #41,
docs/PULL_REQUESTS.md). An MP names one with `Repo: NAME`; a name that is not configured
here is refused at admission, never cloned."""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from mp_engine.config.section import Section

# A repository's name is a directory under SYSTEM/.engine/repos/ and the value of an MP's
# `Repo:` header, so it is kept to what is safe in both.
REPO_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# What a token pasted into the file instead of a variable's name looks like.
TOKEN_LIKE_RE = re.compile(r"^(gh[pousr]_|github_pat_)|^[0-9a-f]{40}$")
# `git@host:owner/repo(.git)`: the scp-like form git accepts for ssh.
SCP_URL_RE = re.compile(r"^(?:[\w.-]+@)?([\w.-]+):(?!//)(.+)$")
GITHUB_API = "https://api.github.com"


def split_url(url: str) -> tuple[str, str]:
    """(host, path without a leading slash or a trailing `.git`) of a git URL, in any of
    the forms git takes (https, ssh://, scp-like `git@host:path`, file://)."""
    if "://" in url:
        parts = urlsplit(url)
        host, path = parts.hostname or "", parts.path
    elif m := SCP_URL_RE.match(url):
        host, path = m[1], m[2]
    else:
        host, path = "", url
    return host.lower(), path.strip("/").removesuffix(".git")


class RepoConfig(Section):
    """One `[repos.NAME]` table."""

    url: str = Field(min_length=1, description="the git URL the engine fetches from and pushes to")
    base: str = Field("main", min_length=1, description="the branch work starts from and pull requests target")
    land: Literal["merge", "branch", "pull_request"] = Field(
        "pull_request", description="verified work: merged into `base`, left on mp/<MP-id>, or a pull request"
    )
    forge: Literal["", "github", "none"] = Field(
        "", description='the forge\'s API: "github" (default for github.com URLs and with api_url) or "none"'
    )
    api_url: str = Field("", description="the API's root, for GitHub Enterprise (`https://HOST/api/v3`)")
    token_env: str = Field("", description="the environment variable holding the token (taken out at start)")
    reviewers: tuple[str, ...] = Field((), description="logins whose comments steer; empty: anyone with write access")
    ci_timeout: float = Field(1800.0, gt=0, description="seconds to wait for CI on one push")
    ci_rounds: int = Field(2, ge=1, description="pushes CI judges per cycle; red before the last is fixed")
    ci_poll: float = Field(0.0, ge=0, description="seconds between looks at CI (0: 10 s at first, then every 30 s)")
    review_rounds: int = Field(3, ge=0, description="rounds of review comments acted on")
    review_poll: float = Field(
        60.0, gt=0, description="seconds between looks at a pull request waiting for review (free while unchanged)"
    )
    merge: Literal["never", "when_green_and_approved"] = "never"
    issues_label: str = Field("", description="open issues with this label become agent MPs (empty: off)")
    taken_label: str = Field("mp-engine: taken", min_length=1, description="the label an issue gets once taken")
    issues_poll: float = Field(300.0, gt=0, description="seconds between looks for issues with issues_label")
    checks: tuple[str, ...] = Field((), description="the checks of an MP made from an issue without a Validate section")

    @field_validator("token_env")
    @classmethod
    def _token_env_is_a_name(cls, value: str) -> str:
        if value and TOKEN_LIKE_RE.search(value):
            raise ValueError(
                "looks like a token itself, not the name of a variable; never write a token into this file: "
                'export it (e.g. GITHUB_TOKEN=...) in the engine\'s environment and set token_env = "GITHUB_TOKEN"'
            )
        if value and not ENV_NAME_RE.match(value):
            raise ValueError(f"{value!r} is not an environment variable's name")
        return value

    @model_validator(mode="after")
    def _coherent(self) -> RepoConfig:
        if "://" in self.url and urlsplit(self.url).password is not None:
            raise ValueError(
                "url carries a password or token; never write one into this file: name the variable that holds "
                "the token in token_env, and give the url without it"
            )
        if self.api_url and not self.api_url.startswith(("https://", "http://")):
            raise ValueError(
                f"api_url must be an http(s) URL such as https://ghe.example.com/api/v3, got {self.api_url!r}"
            )
        if self.forge_kind == "github" and "/" not in self.slug:
            raise ValueError(f"url {self.url!r} does not name OWNER/REPO on the forge")
        if self.land == "pull_request" and self.forge_kind != "github":
            raise ValueError(
                'land = "pull_request" needs a forge to open the pull request on: for GitHub Enterprise set '
                'api_url = "https://HOST/api/v3" (forge = "github" is then implied), or land = "branch"'
            )
        if self.land == "pull_request" and not self.token_env:
            raise ValueError(
                'land = "pull_request" needs a token: set token_env to the name of the environment variable '
                "holding it (docs/PULL_REQUESTS.md lists the least scope it needs)"
            )
        if self.issues_label and self.forge_kind != "github":
            raise ValueError('issues_label needs a forge to read issues from (forge = "github")')
        if self.issues_label and self.land != "pull_request":
            raise ValueError(
                'issues_label answers each issue with a pull request that fixes it: set land = "pull_request", '
                "or remove issues_label"
            )
        return self

    @property
    def forge_kind(self) -> Literal["github", "none"]:
        """The forge in effect: as set, else GitHub for github.com URLs or with api_url."""
        if self.forge:
            return self.forge
        return "github" if self.api_url or split_url(self.url)[0] == "github.com" else "none"

    @property
    def api_root(self) -> str:
        return (self.api_url or GITHUB_API).rstrip("/")

    @property
    def slug(self) -> str:
        """`owner/repo` on the forge (the URL's path)."""
        return split_url(self.url)[1]


def check_repo_names(repos: dict[str, RepoConfig]) -> dict[str, RepoConfig]:
    bad = [name for name in repos if not REPO_NAME_RE.match(name)]
    if bad:
        raise ValueError(
            f"[repos.{bad[0]}]: a repository's name is letters, digits, `.`, `_` and `-` (at most 64, "
            "not starting with a punctuation mark); it is the `Repo:` header's value and a directory name"
        )
    return repos
