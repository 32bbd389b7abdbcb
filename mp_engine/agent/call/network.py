"""A sandboxed call's network as its end reads it (issue #44): the hosts the call was allowed,
where it was configured to connect, what the relay could not reach for it, and what the CLI
said when it could not connect.

Two failures look the same to the CLI (its connection is refused, or a name does not
resolve) and mean different things:

- the sandbox refused it (a host the rules do not allow): `unreachable`, the run ends BLOCKED
  with the host named where it is known, and the one fix (`sandbox_allow_hosts`);
- the host is allowed, but the engine's host could not reach it either (the relay says which
  and why): an outage of that host, named (`transient`), retried like any other.

And where the relay joined the CLI to its API, a connection that failed after that (a
provider that resets) is not the sandbox's: the ordinary rules read it (an outage).

The real CLIs do not say which host they tried. The error names it where it does; else the
workspace's configuration, when it points the CLI somewhere (agent/call/endpoints.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# It could not connect: refused, a name that does not resolve, no route. claude: "API Error:
# Unable to connect to API (ConnectionRefused)"; codex: "Reconnecting... waiting for network
# (Connection failed: error sending request)", forever; aider: "litellm.InternalServerError:
# ... Connection error." (none of them names the host).
CONNECT_RE = re.compile(
    r"connection ?refused|\bECONNREFUSED\b|\[Errno 111\]|unable to connect to api|waiting for network|"
    r"error sending request|connection error\.|APIConnectionError|\bENOTFOUND\b|\bEAI_AGAIN\b|getaddrinfo|"
    r"name or service not known|failure in name resolution|failed to resolve|could not resolve host|dns error|"
    r"failed to lookup address|no address associated|network is unreachable|\bENETUNREACH\b",
    re.I,
)
# Of those, what a CLI says about its own API (not a command the agent ran: pip retrying a
# refused index is the agent's work, not a reason to stop it).
API_RE = re.compile(
    r"unable to connect to api|waiting for network|litellm\.(?:APIConnectionError|\w+: .*connection error\.)", re.I
)
# Hosts the CLIs try besides their model API, harmlessly refused in the sandbox: litellm's price
# list (aider), codex's start-up probes, claude's telemetry. A failure naming one is not the call's.
BACKGROUND_HOSTS = ("raw.githubusercontent.com", "ab.chatgpt.com", "api.github.com", "statsig.anthropic.com")
# A host in an error: a URL, urllib3's "host='h', port=p", node's "ECONNREFUSED h:p", "resolve 'h'".
HOST_RE = re.compile(
    r"\b(?:https?|wss?)://([\w.-]+|\[[0-9a-f:]+\])(?::(\d+))?|host='([\w.-]+)', port=(\d+)|"
    r"\b(?:ECONNREFUSED|ENOTFOUND|EAI_AGAIN) ([\w.-]+)(?::(\d+))?|resolve '([\w.-]+)'",
    re.I,
)
# codex retries a connection it cannot make forever ("Reconnecting... waiting for network"):
# three in a row is no blip. A failure the sandbox made is stopped at the second: no retry
# reaches a host the rules do not allow (aider would retry for a minute).
WAITING_RE = re.compile(r"waiting for network", re.I)
WAITING_GIVE_UP = 3
REFUSED_GIVE_UP = 2


@dataclass(frozen=True)
class Network:
    """A sandboxed call's network: the hosts it was allowed; the (host:port, where) it is
    configured to reach beyond its level's own (empty: the level's hosts are its API); the
    (host:port, why) allowed hosts the relay could not reach; the (host:port, where) the
    workspace points the CLI at, never allowed; the hosts the relay joined it to."""

    allowed: tuple[str, ...]
    configured: tuple[tuple[str, str], ...] = ()
    refused: tuple[tuple[str, str], ...] = ()
    named: tuple[tuple[str, str], ...] = ()
    joined: tuple[str, ...] = ()

    @property
    def api(self) -> set[str]:
        """The hosts the CLI talks to its model through: its configured endpoint, else its
        level's hosts."""
        return {h for h, _ in self.configured} or set(self.allowed)

    @property
    def through(self) -> bool:
        """The relay joined the CLI to its API (and the workspace sent it nowhere else): a
        failure to connect after that is not the sandbox's."""
        return not self.elsewhere and any(h in self.api for h in self.joined)

    @property
    def elsewhere(self) -> list[tuple[str, str]]:
        """What the workspace points the CLI at that the sandbox does not open: where it went."""
        return [(h, src) for h, src in self.named if h not in self.allowed]

    @property
    def down(self) -> list[tuple[str, str]]:
        """The relay's failures to reach the host the CLI talks to (its configured endpoint, else
        its level's hosts), unless the workspace sent it elsewhere. A refused side host (claude
        asks api.anthropic.com for more than the model) is not the call's."""
        if self.elsewhere:
            return []
        return [(h, why) for h, why in self.refused if h in self.api]


def _said(lines: list[str], i: int, pattern: re.Pattern[str]) -> str:
    """Line `i` with the next one (CLIs wrap their errors): "" when the match is not in line
    `i`'s own text or the pair is about a background host."""
    pair = " ".join(lines[i : i + 2]).strip()
    m = pattern.search(pair)
    if m is None or m.start() >= len(lines[i]) or any(h in pair for h in BACKGROUND_HOSTS):
        return ""
    return pair if len(pair) <= 300 else pair[:297] + "..."


def failures(text: str, pattern: re.Pattern[str] = CONNECT_RE) -> list[str]:
    """Each time the CLI said it could not connect (`API_RE`: to its API), but about a
    background host."""
    lines = [ln.strip() for ln in text.splitlines()]
    return [said for i in range(len(lines)) if (said := _said(lines, i, pattern))]


def last_failure(text: str) -> str:
    """What the CLI last said about not connecting ("" when it did not)."""
    found = failures(text)
    return found[-1] if found else ""


def blocked_host(said: str, network: Network) -> str | None:
    """The host:port the sandbox kept the CLI from: one its error (`said`) names, else one the
    workspace points it at; None when neither says (the real CLIs do not name it)."""
    return said_host(said, network) or next((h for h, _ in network.elsewhere), None)


def said_host(said: str, network: Network) -> str | None:
    """A host the error names that the sandbox does not allow (then it refused that one)."""
    for m in HOST_RE.finditer(said):
        host = next(g for g in (m.group(1), m.group(3), m.group(5), m.group(7)) if g)
        scheme = m.group(0).split(":", 1)[0].lower()
        port = m.group(2) or m.group(4) or m.group(6) or {"https": "443", "http": "80"}.get(scheme)
        # A bare host means port 443 in sandbox_allow_hosts, as there.
        if f"{host}:{port or 443}" not in network.allowed and host not in BACKGROUND_HOSTS:
            return f"{host}:{port}" if port else host
    return None


def refused_detail(said: str, network: Network) -> str:
    """The detail of a call the sandbox refused: what it said, what the sandbox allows, and
    where the workspace points it."""
    host = blocked_host(said, network)
    allows = ", ".join(network.allowed) or "no host"
    where = next((f"; {src} points it at {h}" for h, src in network.named if h == host), "")
    detail = f"it could not connect from the sandbox ({said}), which allows only {allows}{where}"
    return detail + ("" if host else "; it did not say to which host")


def down_detail(said: str, network: Network) -> str:
    """The detail of a call whose endpoint the engine's host could not reach either."""
    where = dict(network.configured)
    hosts = "; ".join(f"{h} ({why}{f'; set by {where[h]}' if h in where else ''})" for h, why in network.down)
    return f"the engine host could not reach {hosts} for it: {said}"


def down_host(network: Network) -> str | None:
    return network.down[0][0] if network.down else None


def gives_up(text: str, network: Network) -> bool:
    """Whether a sandboxed call that is still running can only wait for what will not come:
    it failed twice to connect to its API where the sandbox refused (nothing the relay
    tried), or it keeps waiting for the network (codex, forever) where the relay did try.
    What the agent's own commands print never stops it."""
    if (network.refused or network.joined) and not network.elsewhere:
        return len(WAITING_RE.findall(text)) >= WAITING_GIVE_UP
    return len(failures(text, API_RE)) >= REFUSED_GIVE_UP
