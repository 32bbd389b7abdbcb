"""What a failed GitHub call means, as an ordered table of rules over one `Failure`, and
the error that tells the operator what to do (docs/PULL_REQUESTS.md, When things fail).

GitHub's own words are used where it gives them: `X-Accepted-GitHub-Permissions` names
the fine-grained permission a 403 lacked, `X-Accepted-OAuth-Scopes` a classic token's
scope; without them, each call's `needs` (the permission it documents) is named.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mp_engine.core.errors import (
    ForgeAuthError,
    ForgeError,
    ForgeNotFound,
    ForgeRateLimited,
    ForgeUnavailable,
)


@dataclass(frozen=True)
class Failure:
    """One failed call: what it was, and what GitHub answered (status 0: no answer)."""

    call: str  # "open a pull request on me/app"
    needs: str  # the fine-grained permission it needs, e.g. "pull_requests=write"
    status: int
    headers: Mapping[str, str]  # lower-case names
    message: str  # GitHub's `message`, or the transport's error
    retry_after: float | None = None  # seconds, when githubkit recognised a rate limit
    secondary: bool = False


def _rate_limited(f: Failure) -> ForgeError:
    wait = f.retry_after if f.retry_after is not None else 60.0
    until = time.time() + wait
    kind = "secondary rate limit (too many requests at once)" if f.secondary else "rate limit"
    when = time.strftime("%H:%M:%S", time.localtime(until))
    return ForgeRateLimited(
        f"GitHub's {kind} is reached ({f.call}): nothing is sent to it before {when} ({wait:.0f} s); "
        "the run waits and goes on, nothing is lost. If this repeats, give the engine a token of its own.",
        until,
        secondary=f.secondary,
    )


def _refused(f: Failure) -> ForgeError:
    return ForgeAuthError(
        f"GitHub refused the token ({f.call}, 401: {f.message}): it is wrong, expired or revoked. Fix: put a valid "
        "token in the variable `token_env` names and restart the engine.",
        needs=f.needs,
    )


def _forbidden(f: Failure) -> ForgeError:
    needs = f.headers.get("x-accepted-github-permissions") or f.needs
    scopes = f.headers.get("x-accepted-oauth-scopes")
    classic = f" (a classic token: the scope {scopes})" if scopes else ""
    return ForgeAuthError(
        f"GitHub forbade {f.call} (403: {f.message}): the token lacks a permission. Fix: give the fine-grained "
        f"token {needs} on this repository{classic} (docs/PULL_REQUESTS.md lists the least set).",
        needs=needs,
    )


def _missing(f: Failure) -> ForgeError:
    return ForgeNotFound(
        f"GitHub found nothing for {f.call} (404): the repository, pull request or issue does not exist, or the "
        f"token cannot see it (a fine-grained token must be given this repository, with {f.needs})."
    )


def _unavailable(f: Failure) -> ForgeError:
    said = f"{f.status}: {f.message}" if f.status else f.message
    return ForgeUnavailable(
        f"GitHub did not answer {f.call} ({said}); the engine retries later and loses nothing. "
        "If this lasts, check https://www.githubstatus.com and the host's network."
    )


def _other(f: Failure) -> ForgeError:
    return ForgeError(f"GitHub answered {f.call} with {f.status}: {f.message}")


def is_rate_limit(f: Failure) -> bool:
    return f.retry_after is not None or (f.status in (403, 429) and f.headers.get("x-ratelimit-remaining") == "0")


# Ordered: the first rule that holds decides.
RULES: list[tuple[Callable[[Failure], bool], Callable[[Failure], ForgeError]]] = [
    (is_rate_limit, _rate_limited),
    (lambda f: f.status == 429, _rate_limited),
    (lambda f: f.status == 401, _refused),
    (lambda f: f.status == 403, _forbidden),
    (lambda f: f.status == 404, _missing),
    (lambda f: f.status == 0 or f.status >= 500, _unavailable),
    (lambda f: True, _other),
]


def error_for(f: Failure) -> ForgeError:
    return next(make(f) for holds, make in RULES if holds(f))


def is_transient(f: Failure) -> bool:
    """Worth retrying at once (with backoff): no answer, or a 5xx."""
    return f.status == 0 or f.status >= 500
