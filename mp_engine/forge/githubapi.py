"""One githubkit client for one repository's forge: an auth that shows no token, one
connection pool for every thread, and calls that are retried when that is safe and whose
failures say what to do (githuberrors.py).

githubkit is imported here and in github.py only (the `[github]` extra). Its own retries
are off: a transient failure (no answer, a 5xx) is retried here, a few times with jittered
backoff and only for calls that are safe to repeat; a rate limit is not slept through in
a thread but raised (`ForgeRateLimited`, with the time) so the run waits where `status`
shows it. Its HTTP cache (hishel) revalidates every GET with `If-None-Match`: a 304 costs
no rate limit (GitHub's docs, "Use conditional requests").
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from mp_engine import __version__
from mp_engine.forge.base import RateState
from mp_engine.forge.credentials import Token
from mp_engine.forge.githuberrors import Failure, error_for, is_transient

if TYPE_CHECKING:
    from githubkit import GitHub, Response

T = TypeVar("T")
PAGE, MAX_PAGES = 100, 50


class _Transient(Exception):
    def __init__(self, failure: Failure):
        self.failure = failure


def _auth(token: Token):
    """githubkit's auth strategy for `token`, which (unlike its TokenAuthStrategy, a
    dataclass) shows no token in a repr or a traceback."""
    from githubkit.auth.base import BaseAuthStrategy

    class _Header(httpx.Auth):
        def auth_flow(self, request: httpx.Request):
            request.headers["Authorization"] = f"Bearer {token.reveal()}"
            yield request

        def __repr__(self) -> str:
            return f"<auth {token!r}>"

    class _Strategy(BaseAuthStrategy):
        def get_auth_flow(self, github) -> httpx.Auth:
            return _Header()

        def __repr__(self) -> str:
            return f"<auth {token!r}>"

    return _Strategy()


def _client(*args: Any, **kwargs: Any) -> tuple[GitHub[Any], Callable[[], None]]:
    """githubkit's client, with one httpx client (one connection pool, kept alive) for
    every call from every thread: githubkit otherwise opens and closes one per call outside
    a `with`, and its `with` holds the client in a ContextVar, which other threads do not
    see. httpx's `Client` is thread-safe. Returned with the function that closes the pool
    (githubkit's `GitHub` has no `close`)."""
    from githubkit import GitHub

    class SharedGitHub(GitHub):
        lock = threading.Lock()
        shared: httpx.Client | None = None

        @contextlib.contextmanager
        def get_sync_client(self):
            with self.lock:
                if self.shared is None:
                    self.shared = self._create_sync_client()
            yield self.shared

        def close(self) -> None:
            with self.lock:
                if self.shared is not None:
                    self.shared.close()
                    self.shared = None

    client = SharedGitHub(*args, **kwargs)
    return client, client.close


class GitHubApi:
    """githubkit's REST namespace (`rest`) and the one way to call it (`call`, `pages`)."""

    def __init__(
        self,
        api_root: str,
        token: Token,
        *,
        timeout: float = 30.0,
        attempts: int = 3,
        sleep: Callable[[float], None] = time.sleep,
    ):
        from githubkit.cache import MemCacheStrategy

        self.gh, self._close = _client(
            _auth(token),
            base_url=api_root,
            user_agent=f"mp-engine/{__version__}",
            timeout=timeout,
            auto_retry=False,  # ours below: only what is safe to repeat, and no sleeping through a rate limit
            http_cache=True,  # conditional GETs (ETag): a 304 costs no rate limit
            cache_strategy=MemCacheStrategy(),  # this forge's own, not githubkit's process-wide one
        )
        self.rest = self.gh.rest
        self._attempts, self._sleep = attempts, sleep
        self._rate: RateState | None = None

    def __repr__(self) -> str:
        return f"<GitHubApi {self.gh.config.base_url}>"

    def call(self, call: str, needs: str, send: Callable[[], Response[T]], *, repeatable: bool = True) -> Response[T]:
        """`send()`, retried while GitHub is away or answers 5xx when the call is safe to
        repeat; any failure becomes a `ForgeError` that says what to do."""
        retrying = Retrying(
            stop=stop_after_attempt(self._attempts if repeatable else 1),
            wait=wait_exponential_jitter(initial=1, max=8),
            retry=retry_if_exception(lambda e: isinstance(e, _Transient)),
            sleep=self._sleep,
            reraise=True,
        )
        try:
            return retrying(self._once, call, needs, send)
        except _Transient as e:
            raise error_for(e.failure) from None

    def _once(self, call: str, needs: str, send: Callable[[], Response[T]]) -> Response[T]:
        from githubkit.exception import RateLimitExceeded, RequestError, RequestFailed, SecondaryRateLimitExceeded

        try:
            response = send()
        except RateLimitExceeded as e:
            self._note(e.response.raw_response)
            failure = self._failure(call, needs, e.response.raw_response)
            secondary = isinstance(e, SecondaryRateLimitExceeded)
            limited = Failure(
                call, needs, failure.status, failure.headers, failure.message, e.retry_after.total_seconds(), secondary
            )
            raise error_for(limited) from None
        except RequestFailed as e:
            self._note(e.response.raw_response)
            failure = self._failure(call, needs, e.response.raw_response)
            if is_transient(failure):
                raise _Transient(failure) from None
            raise error_for(failure) from None
        except RequestError as e:  # no answer: refused, reset, timed out
            raise _Transient(Failure(call, needs, 0, {}, type(e.exc).__name__ + f": {e.exc}")) from None
        self._note(response.raw_response)
        return response

    @staticmethod
    def _failure(call: str, needs: str, raw: httpx.Response) -> Failure:
        try:
            message = str(raw.json().get("message", ""))
        except ValueError:
            message = raw.text[:200]
        headers = {k.lower(): v for k, v in raw.headers.items()}
        return Failure(call, needs, raw.status_code, headers, message)

    def _note(self, raw: httpx.Response) -> None:
        h = raw.headers
        if "x-ratelimit-remaining" in h and "x-ratelimit-limit" in h:
            reset = float(h.get("x-ratelimit-reset", 0))
            self._rate = RateState(int(h["x-ratelimit-limit"]), int(h["x-ratelimit-remaining"]), reset)

    def rate(self) -> RateState | None:
        return self._rate

    def pages(self, call: str, needs: str, fetch: Callable[[int], Response[list[T]]]) -> list[T]:
        """Every item of a listing, 100 a page, until a page is short (at most 50 pages)."""
        items: list[T] = []
        for page in range(1, MAX_PAGES + 1):
            got = self.call(call, needs, functools.partial(fetch, page)).parsed_data
            items += got
            if len(got) < PAGE:
                break
        return items

    def close(self) -> None:
        """Close the connections."""
        self._close()


def unchanged(response: Response[Any]) -> bool:
    """True when the answer is the cached one, which GitHub confirmed with a 304 (githubkit
    asks hishel to revalidate every GET: `Cache-Control: no-cache`)."""
    return bool(response.raw_response.extensions.get("hishel_from_cache"))


def since_param(since: str) -> Any:
    """`since` for a query, as GitHub wants it: `YYYY-MM-DDTHH:MM:SSZ`. A string, not the
    datetime githubkit's signature asks for: githubkit 0.16.1 renders a datetime with
    `str()` (`2026-01-01 00:00:00+00:00`), which GitHub refuses ("The since parameter
    needs to be in ISO 8601 format"); the double's check against GitHub's description
    found it."""
    try:
        when = datetime.fromisoformat(since.replace("Z", "+00:00"))
    except ValueError as e:
        raise ValueError(f"`since` must be an ISO 8601 time, got {since!r}") from e
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
