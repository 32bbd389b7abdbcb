"""A diagnosis: a class, a sentence, exactly one fix; it round-trips through the ledger."""

from __future__ import annotations

from mp_engine.record.diagnosis import Diagnosis, engine_error, invalid_mp


def test_an_invalid_mp_is_refused_before_anything_ran_with_its_line():
    d = invalid_mp("unknown header key 'Colour'", "Remove `Colour:`.", 2)
    assert (d.kind, d.summary, d.line, d.step_id) == ("invalid_mp", "invalid MP", 2, None)
    assert d.diagnosis == "The MP was refused before anything ran: unknown header key 'Colour'."


def test_round_trip_ignores_unknown_keys_from_a_newer_engine():
    d = engine_error(ValueError("boom"))
    data = {**d.to_dict(), "added_later": True}
    assert Diagnosis.from_dict(data) == d
