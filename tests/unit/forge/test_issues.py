"""Issues as a source (mp_engine/forge/issues.py): two engines on one repository, and one
issue taken once."""

from __future__ import annotations

from mp_engine.forge.credentials import Token
from mp_engine.forge.github import GitHubForge
from mp_engine.forge.issues import take, waiting
from tests.unit.forge.conftest import SLUG


def test_two_engines_see_the_issue_and_only_one_takes_it(double, token):
    number = double.repo(SLUG).add_issue("Greet people", labels=("mp-engine",)).number
    one, two = (GitHubForge(SLUG, double.url, Token(token, "APP_PAT")) for _ in range(2))
    seen_by_one, seen_by_two = waiting(one, "mp-engine"), waiting(two, "mp-engine")
    assert [i.number for i in seen_by_one] == [i.number for i in seen_by_two] == [number]
    assert take(one, seen_by_one[0], "mp-engine", "mp-engine: taken") is True
    assert take(two, seen_by_two[0], "mp-engine", "mp-engine: taken") is False
    assert waiting(one, "mp-engine") == [] and double.repo(SLUG).issues[number].labels == ["mp-engine: taken"]


def test_an_engine_killed_between_the_two_labels_takes_it_after_its_restart(any_forge, new_issue):
    number = new_issue("Greet", labels=("mp-engine",))
    any_forge.add_label(number, "mp-engine: taken")  # ... and then kill -9
    [issue] = waiting(any_forge, "mp-engine")
    assert take(any_forge, issue, "mp-engine", "mp-engine: taken") is True
