"""The lockout's decisions, with a clock of the test's own: a request closes, a client and
an address lock for the lockout time, the server backs off (doubling, capped), a lock
ends when its time is up."""

from __future__ import annotations

from mp_engine.client.mcp.gate.limits import Limits
from mp_engine.client.mcp.gate.lockout import ADDRESS, CLIENT, REQUEST, SERVER, Attempt, Strike, failed, holding

LIMITS = Limits()


def fail(strikes: dict[str, Strike], times: int, now: float) -> tuple[dict[str, Strike], list]:
    locks = []
    for _ in range(times):
        strikes, lock = failed(strikes, now, LIMITS)
        locks.append(lock and lock.kind)
    return strikes, locks


def fresh(attempt: Attempt) -> dict[str, Strike]:
    return {kind: Strike() for kind in attempt.keys()}


def test_the_keys_leave_out_an_address_every_client_shares():
    assert set(Attempt("r", "c", None).keys()) == {REQUEST, CLIENT, SERVER}
    assert Attempt("r", "c", "198.51.100.7").keys()[ADDRESS] == "address:198.51.100.7"


def test_one_request_closes_after_five_and_an_address_locks_with_it():
    strikes, locks = fail(fresh(Attempt("r", "c", "198.51.100.7")), 5, now=1000.0)
    assert locks == [None] * 4 + [ADDRESS]  # request and address reach five together; the longer shows
    assert strikes[REQUEST].until == strikes[ADDRESS].until == 1000.0 + LIMITS.lockout_s
    assert holding(strikes, 1000.0 + LIMITS.lockout_s + 1) is None


def test_new_requests_meet_the_client_lock_and_new_clients_the_server_backoff():
    now, client, server = 1000.0, Strike(), Strike()
    kinds = []
    for n in range(LIMITS.global_failures):
        # a new request every time, and a new client every third: only the server key is shared
        if n % 3 == 0:
            client = Strike()
        s = {REQUEST: Strike(), CLIENT: client, SERVER: server}
        s, lock = failed(s, now, LIMITS)
        client, server = s[CLIENT], s[SERVER]
        kinds.append(lock and lock.kind)
    assert kinds[:-1] == [None] * (LIMITS.global_failures - 1) and kinds[-1] == SERVER
    assert server.until == now + LIMITS.backoff_s


def test_the_server_backoff_doubles_and_stops_at_its_cap():
    server, waits, now = Strike(count=LIMITS.global_failures - 1), [], 0.0
    for _ in range(5):
        s, lock = failed({SERVER: server}, now, LIMITS)
        server = s[SERVER]
        waits.append(lock.until - now)
        now = lock.until  # the next guess comes when the backoff ends
    assert waits == [10.0, 20.0, 40.0, 60.0, 60.0]


def test_the_client_locks_after_ten_in_a_row_over_many_requests():
    strikes = {CLIENT: Strike(count=LIMITS.client_failures - 1), REQUEST: Strike()}
    strikes, lock = failed(strikes, 5.0, LIMITS)
    assert lock.kind == CLIENT and lock.until == 5.0 + LIMITS.lockout_s and strikes[CLIENT].count == 0
