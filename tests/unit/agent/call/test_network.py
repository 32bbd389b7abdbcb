"""A sandboxed call's network as its end reads it (issue #44): which failures to connect are
the call's (not a background host's), which host the sandbox refused, whether the relay's
failure is the call's endpoint, and when a running call can only wait for what will not come."""

from __future__ import annotations

from mp_engine.agent.call.network import Network, blocked_host, failures, gives_up, last_failure

CODEX_WAITING = "Reconnecting... waiting for network (Connection failed: error sending request)"
AIDER = [
    "HTTPSConnectionPool(host='raw.githubusercontent.com', port=443): Max retries exceeded (Caused by "
    "NameResolutionError(\"Failed to resolve 'raw.githubusercontent.com' (Temporary failure in name resolution)\"))",
    "Aider v0.86.2",
    "litellm.InternalServerError: InternalServerError: OpenAIException - Connection ",
    "error.",
    "The API provider's servers are down or overloaded.",
    "Retrying in 0.2 seconds...",
]
BOXED = Network(("api.openai.com:443",))


def test_a_failure_is_counted_once_even_wrapped_and_never_for_a_background_host():
    text = "\n".join(AIDER)
    assert failures(text) == ["litellm.InternalServerError: InternalServerError: OpenAIException - Connection error."]
    assert last_failure("\n".join(AIDER[:2])) == ""  # litellm's price list only: not the call's
    assert len(failures("\n".join([*AIDER, *AIDER[2:]]))) == 2


def test_the_refused_host_is_the_one_the_error_names_else_where_the_workspace_points():
    assert blocked_host("connect ECONNREFUSED 10.0.0.9:4000", BOXED) == "10.0.0.9:4000"
    assert blocked_host("failed to resolve 'gw.corp'", BOXED) == "gw.corp"
    assert blocked_host("error sending request for url (https://api.openai.com/v1/responses)", BOXED) is None
    named = Network(("api.openai.com:443",), named=(("10.0.0.9:4000", ".env"), ("api.openai.com:443", ".env")))
    assert blocked_host("Connection error.", named) == "10.0.0.9:4000"


def test_the_relays_failure_is_the_calls_only_for_its_endpoint_and_not_when_the_workspace_sent_it_elsewhere():
    refused = (("api.openai.com:443", "no DNS"), ("gw:80", "refused"))
    assert Network(("api.openai.com:443", "gw:80"), configured=(("gw:80", "X"),), refused=refused).down == [refused[1]]
    assert Network(("api.openai.com:443",), refused=refused[:1]).down == [refused[0]]  # the preset's API
    elsewhere = Network(("api.openai.com:443",), refused=refused[:1], named=(("evil:443", ".env"),))
    assert elsewhere.down == [] and elsewhere.elsewhere == [("evil:443", ".env")]


def test_a_running_call_gives_up_on_what_the_sandbox_withholds_and_on_waiting_forever():
    once = "\n".join(AIDER)
    assert not gives_up(once, BOXED) and gives_up(once + "\n" + once, BOXED)  # the second: no retry helps
    joined = Network(("api.openai.com:443",), joined=("api.openai.com:443",))
    assert not gives_up(once + "\n" + once, joined)  # it reached its API: a provider's blip, retried
    # An allowed endpoint the relay could not reach: it may come back; codex waits forever, three in a row is no blip.
    down = Network(("gw:80",), refused=(("gw:80", "refused"),))
    assert not gives_up(f"{CODEX_WAITING}\n{CODEX_WAITING}", down)
    assert gives_up("\n".join([CODEX_WAITING] * 3), down)
    assert not gives_up("Tokens: 1.4k sent\nApplied edit to out/a.txt", BOXED)
    # What the agent's commands print is its work: pip retrying an index the sandbox refuses.
    pip = "WARNING: Retrying after connection broken by 'NewConnectionError(...: [Errno 111] Connection refused')'"
    assert len(failures("\n".join([pip] * 5))) == 5 and not gives_up("\n".join([pip] * 5), BOXED)
    assert failures('{"detail": "FileNotFoundError: [Errno 2] No such file"}') == []  # not ENOTFOUND
