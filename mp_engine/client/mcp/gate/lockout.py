"""Wrong passphrases on the consent page and the locks they start, decided here as data:
the store keeps the strikes, consent.py asks and acts, and the tests bring their own clock.

A wrong passphrase counts against four keys at once (issue #46), each with its own rule:

| key | counts | then |
|---|---|---|
| the consent request | every wrong answer on it | closed to passphrases |
| the client | wrong answers in a row, any request | locked out for `lockout_s` |
| the address (only one that tells clients apart: peer.py) | wrong answers in a row | locked out for `lockout_s` |
| the server | wrong answers in a row, from anyone | every passphrase waits a backoff: `backoff_s`, doubling, at most `backoff_max_s` |

No header chooses a key but the address, and the address counts only when a trusted proxy
vouches for it; so rotating X-Forwarded-For, opening new requests or registering new
clients still meets the server's backoff. The owner is never kept out by others for longer
than `backoff_max_s` (their client and address are their own); `mp-engine mcp
approve-login` on the host passes every lock. A right passphrase clears its keys.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from mp_engine.client.mcp.gate.limits import Limits

REQUEST, CLIENT, ADDRESS, SERVER = "request", "client", "address", "server"


@dataclass(frozen=True)
class Strike:
    """One key's record: wrong answers in a row, the lock it holds, backoffs in a row."""

    count: int = 0
    until: float | None = None
    trips: int = 0


@dataclass(frozen=True)
class Lock:
    kind: str  # REQUEST, CLIENT, ADDRESS or SERVER
    until: float


@dataclass(frozen=True)
class Attempt:
    """A passphrase typed on the page of consent request `request` for `client`, from
    `address` (None: an address every client shares, peer.py)."""

    request: str
    client: str
    address: str | None

    def keys(self) -> dict[str, str]:
        keys = {REQUEST: f"request:{self.request}", CLIENT: f"client:{self.client}", SERVER: "server"}
        if self.address is not None:
            keys[ADDRESS] = f"address:{self.address}"
        return keys


def _closing(limit: Callable[[Limits], int]) -> Callable[[Strike, float, Limits], Strike]:
    """Locked for `lockout_s` at the limit; the count starts over."""

    def rule(s: Strike, now: float, limits: Limits) -> Strike:
        if s.count + 1 >= limit(limits):
            return Strike(0, now + limits.lockout_s, s.trips)
        return replace(s, count=s.count + 1)

    return rule


def _backoff(s: Strike, now: float, limits: Limits) -> Strike:
    """At the limit and at every failure past it, a backoff twice the last, up to the cap."""
    count = s.count + 1
    if count < limits.global_failures:
        return replace(s, count=count)
    wait = min(limits.backoff_s * 2**s.trips, limits.backoff_max_s)
    return Strike(count, now + wait, s.trips + 1)


RULES: dict[str, Callable[[Strike, float, Limits], Strike]] = {
    REQUEST: _closing(lambda lim: lim.request_failures),
    CLIENT: _closing(lambda lim: lim.client_failures),
    ADDRESS: _closing(lambda lim: lim.address_failures),
    SERVER: _backoff,
}


BREADTH = [REQUEST, CLIENT, ADDRESS, SERVER]  # of two locks ending together, the broader is named


def holding(strikes: dict[str, Strike], now: float) -> Lock | None:
    """The lock that holds at `now` (the longest, when several do), or None."""
    locks = [Lock(kind, s.until) for kind, s in strikes.items() if s.until is not None and s.until > now]
    return max(locks, key=lambda lock: (lock.until, BREADTH.index(lock.kind)), default=None)


def failed(strikes: dict[str, Strike], now: float, limits: Limits) -> tuple[dict[str, Strike], Lock | None]:
    """The strikes after one more wrong passphrase (`strikes` has a record, maybe empty,
    for each key of the attempt), and the lock that now holds."""
    after = {kind: RULES[kind](s, now, limits) for kind, s in strikes.items()}
    return after, holding(after, now)


def tries_left(strikes: dict[str, Strike], limits: Limits) -> int:
    """Wrong answers this request may still take before it closes."""
    return limits.request_failures - strikes.get(REQUEST, Strike()).count
