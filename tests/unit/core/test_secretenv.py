"""Secrets held by the process instead of its environment: children get them only when
allowed by name; the redactor still masks them."""

from __future__ import annotations

import os
import subprocess

import pytest

from mp_engine.config.load import Config
from mp_engine.core import secretenv
from mp_engine.core.gitcmd import git
from mp_engine.execute.process import scrub_env
from mp_engine.sync.redact import MASK, Redactor

PATTERNS = Config().secrets.env_patterns


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setenv("DEPLOY_TOKEN", "tok-0123456789")
    monkeypatch.setenv("CUSTOM", "custom-0123456789")
    monkeypatch.setenv("PLAIN", "plain-value")
    monkeypatch.setenv("MP_ENGINE_GIT__POLL_INTERVAL", "3")  # configuration: never held
    yield
    secretenv.release()


def test_hold_moves_named_and_matching_variables_out_of_the_environment(env):
    assert secretenv.hold(["CUSTOM"], PATTERNS) == ["CUSTOM", "DEPLOY_TOKEN"]
    assert "DEPLOY_TOKEN" not in os.environ and "CUSTOM" not in os.environ
    assert os.environ["PLAIN"] == "plain-value" and os.environ["MP_ENGINE_GIT__POLL_INTERVAL"] == "3"
    assert secretenv.held() == ["CUSTOM", "DEPLOY_TOKEN"]
    assert secretenv.environ()["DEPLOY_TOKEN"] == "tok-0123456789" and secretenv.environ()["PLAIN"] == "plain-value"
    secretenv.release()
    assert os.environ["DEPLOY_TOKEN"] == "tok-0123456789" and secretenv.held() == []


def test_a_held_secret_reaches_a_child_only_when_allowed_by_name(env):
    secretenv.hold([], PATTERNS)
    assert "DEPLOY_TOKEN" not in scrub_env()
    assert scrub_env(["DEPLOY_TOKEN"])["DEPLOY_TOKEN"] == "tok-0123456789"
    # A child started without scrubbing (git, ssh, a credential helper) inherits none.
    out = subprocess.run(["env"], capture_output=True, text=True, check=True).stdout
    assert "DEPLOY_TOKEN" not in out and "PLAIN=plain-value" in out


def test_the_engines_git_runs_without_a_held_secret(env, tmp_path):
    secretenv.hold([], PATTERNS)
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "alias.showenv", "!env")
    out = git(tmp_path, "showenv").out
    assert "DEPLOY_TOKEN" not in out and "PLAIN=plain-value" in out


def test_the_redactor_still_masks_a_held_secret(env):
    secretenv.hold([], PATTERNS)
    redact = Redactor.from_config(Config())
    assert redact("deploy with tok-0123456789") == f"deploy with {MASK}"
