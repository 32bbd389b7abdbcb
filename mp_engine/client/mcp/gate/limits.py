"""How much anyone may ask of `mp-engine mcp --http`, and how often. Every number has a
default that fits one owner and a few clients; `--limit NAME=VALUE` (or
`$MP_ENGINE_MCP_LIMITS`, pairs separated by spaces) changes one (docs/ORCHESTRATORS.md)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields, replace

from mp_engine.core.errors import ConfigError

LIMITS_ENV = "MP_ENGINE_MCP_LIMITS"
MAX_MP_BYTES = 1024 * 1024  # the engine's `[engine] max_mp_bytes` default: a bigger MP is refused anyway


@dataclass(frozen=True)
class Limits:
    # Wrong passphrases on the consent page (lockout.py).
    request_failures: int = 5  # close one consent request to passphrases
    client_failures: int = 10  # in a row, lock one client out
    address_failures: int = 5  # in a row from one address (one a trusted proxy vouches for)
    lockout_s: float = 15 * 60  # how long a client or an address stays locked out
    global_failures: int = 20  # in a row, from anyone: every passphrase waits a backoff
    backoff_s: float = 10.0  # the first server-wide backoff; it doubles at each further failure
    backoff_max_s: float = 60.0  # and stops there: the most the owner waits for others' failures
    # Dynamic client registration (registration.py).
    registrations_per_hour: int = 20
    registrations_per_address_per_hour: int = 5
    max_clients: int = 100
    unconsented_client_s: float = 3600.0  # a client no one allowed is forgotten after this
    client_name_chars: int = 100
    redirect_uris: int = 5
    redirect_uri_chars: int = 2000
    pending_per_client: int = 10  # consent requests waiting for the owner, per client
    # Request bodies (body.py): /register, /consent, and /api/v1 (an MP at the size limit,
    # JSON-escaped: a newline or a quote takes two bytes).
    register_body_bytes: int = 16 * 1024
    consent_body_bytes: int = 16 * 1024
    api_body_bytes: int = 2 * MAX_MP_BYTES

    @classmethod
    def parse(cls, pairs: Iterable[str]) -> Limits:
        """The defaults with `NAME=VALUE` pairs applied; ConfigError names what is wrong."""
        known = {f.name: f.type for f in fields(cls)}
        changes: dict[str, float] = {}
        for pair in pairs:
            name, sep, raw = pair.partition("=")
            name = name.strip().replace("-", "_")
            if not sep or name not in known:
                raise ConfigError(
                    f"--limit {pair!r} is not NAME=VALUE with a known NAME; the names are: {', '.join(known)} "
                    "(docs/ORCHESTRATORS.md)"
                )
            try:
                value = int(raw) if known[name] == "int" else float(raw)
            except ValueError:
                raise ConfigError(f"--limit {pair!r}: {raw!r} is not a number") from None
            if value <= 0:
                raise ConfigError(f"--limit {pair!r}: give a number above 0")
            changes[name] = value
        return replace(cls(), **changes)  # type: ignore[arg-type]
