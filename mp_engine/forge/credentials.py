"""A repository's token: read once from the held secrets, kept in memory only, and given
to git without writing it to disk or to a command line.

The token comes from the variable `[repos.NAME] token_env` names, which `secretenv.hold`
took out of `os.environ` at start (the commands do it, with `Config.secret_names`), so no
child process inherits it. `Token` never shows it: not in its repr, its str or a log line.

git gets it as an HTTP header scoped to the repository's URL: `--config-env` names a
variable, set only in that one git process's environment, whose value git reads as
`http.<url>.extraHeader` (git >= 2.31; `git help config`, "--config-env"). Nothing is
written to `.git/config` (actions/checkout persists it there, and a step could read it),
nothing is on git's argv (`/proc/<pid>/cmdline` is readable by every user), and git's own
trace output redacts the header (GIT_TRACE_REDACT, on by default since git 2.30). The
header matches only requests to that URL's scheme, host, port and path, so a changed
`remote.*.url` or `url.*.insteadOf` sends it nowhere else. While a git process for the
repository runs, the token is in its environment and its children's (git-remote-https),
readable through /proc by processes of the same user; an agent under `[agent] sandbox =
"os"` has a PID namespace of its own and sees none of them.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from mp_engine.config.repos import RepoConfig
from mp_engine.config.section import is_loopback
from mp_engine.core import secretenv
from mp_engine.core.errors import ConfigError

AUTH_VARIABLE = "MPE_REPO_AUTHORIZATION"  # set in one git process's environment, never in os.environ


class Token:
    """A secret held in memory; it shows as the variable it came from, never as itself."""

    __slots__ = ("_value", "source")

    def __init__(self, value: str, source: str):
        self._value = value
        self.source = source

    def reveal(self) -> str:
        """The token itself: only for an Authorization header, never for text."""
        return self._value

    def __repr__(self) -> str:
        return f"<token from ${self.source}>"

    __str__ = __repr__

    def __reduce__(self):
        raise TypeError("a Token is not pickled")


def token_for(name: str, repo: RepoConfig, environ: Mapping[str, str] | None = None) -> Token | None:
    """`[repos.NAME]`'s token, or None when it names none (ssh keys, a public repository).
    A named variable that is not set is a `ConfigError` with the fix."""
    if not repo.token_env:
        return None
    environ = secretenv.environ() if environ is None else environ
    value = environ.get(repo.token_env, "").strip()
    if not value:
        raise ConfigError(
            f"[repos.{name}] token_env = {repo.token_env!r}, but {repo.token_env} is not set in the engine's "
            f"environment. Fix: export {repo.token_env} (a fine-grained token, docs/PULL_REQUESTS.md) where the "
            "engine starts (for systemd: an EnvironmentFile), then restart it."
        )
    return Token(value, repo.token_env)


@dataclass(frozen=True)
class GitAuth:
    """What one git call needs to authenticate to one repository: global options (which
    name a variable, never a value) and that variable for the call's environment only."""

    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None

    def __repr__(self) -> str:
        return f"GitAuth(args={self.args!r}, env=<{len(self.env or {})} held>)"


def git_auth(url: str, token: Token | None) -> GitAuth:
    """Credentials for git on `url`: an `Authorization` header for an https URL (or http
    on loopback) with a token (GitHub takes `x-access-token:<token>` as Basic credentials, for fine-grained and
    app tokens alike); nothing otherwise (ssh uses the host's keys, as git does). Any
    credential helper is switched off for the call, so a refused token fails clearly instead
    of git trying another identity."""
    parts = urlsplit(url)
    private = parts.scheme == "https" or (parts.scheme == "http" and is_loopback(parts.hostname or ""))
    if token is None or not private:  # never a token in clear text over a network
        return GitAuth()
    scope = urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path.rstrip("/"), "", ""))
    basic = base64.b64encode(f"x-access-token:{token.reveal()}".encode()).decode()
    return GitAuth(
        ("-c", "credential.helper=", f"--config-env=http.{scope}.extraHeader={AUTH_VARIABLE}"),
        {AUTH_VARIABLE: f"Authorization: Basic {basic}", "GIT_TRACE_REDACT": "1"},
    )
