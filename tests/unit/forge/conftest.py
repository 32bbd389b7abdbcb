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
