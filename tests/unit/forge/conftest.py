"""The GitHub double (tests/forge/) for the forge's tests: one per test, checked at the
end for any request GitHub's OpenAPI description would not allow."""

from __future__ import annotations

import secrets

import pytest

from mp_engine.forge.credentials import Token
from mp_engine.forge.github import GitHubForge
from tests.forge import openapi
from tests.forge.github_double import GitHubDouble

SLUG = "me/app"


@pytest.fixture(scope="session")
def description():
    """GitHub's description, loaded once (it is fetched from npm on first use)."""
    openapi.openapi()
    return openapi.description()


@pytest.fixture
def token() -> str:
    return "github_pat_" + secrets.token_urlsafe(60).replace("-", "a").replace("_", "b")[:82]


@pytest.fixture
def double(description, token):
    gh = GitHubDouble(token)
    gh.repo(SLUG)
    yield gh
    gh.close()
    assert gh.violations == [], "requests or answers GitHub's description does not allow"


@pytest.fixture
def forge(double, token):
    f = GitHubForge(SLUG, double.url, Token(token, "APP_PAT"), sleep=lambda s: None)
    yield f
    f.close()


@pytest.fixture(params=["memory", "github"])
def any_forge(request):
    """Each forge: the simplest one, and GitHub's client against the double."""
    if request.param == "memory":
        from mp_engine.forge.memory import MemoryForge

        return MemoryForge(SLUG)
    return request.getfixturevalue("forge")


@pytest.fixture
def new_issue(any_forge, request):
    """Make an issue on whichever forge `any_forge` is; its number."""
    from mp_engine.forge.base import Issue
    from mp_engine.forge.memory import MemoryForge

    def make(title: str, labels: tuple[str, ...] = ()) -> int:
        if isinstance(any_forge, MemoryForge):
            number = 100 + len(any_forge.issues)
            any_forge.issues[number] = Issue(number, title, "", labels, "", "someone")
            return number
        return request.getfixturevalue("double").repo(SLUG).add_issue(title, labels=labels).number

    return make
