"""The simplest forge (mp_engine/forge/memory.py) answers as GitHub does; the landing and
issue tests run on it and on GitHub's client against the double (test_landing.py)."""

from __future__ import annotations

import pytest

from mp_engine.core.errors import ForgeError
from mp_engine.forge.base import Check, CheckState
from mp_engine.forge.memory import MemoryForge


def test_one_open_pull_request_per_head_and_ci_that_says_when_it_changed():
    forge = MemoryForge()
    forge.open_pull_request(head="mp/x", base="main", title="t", body="b")
    with pytest.raises(ForgeError, match="422"):
        forge.open_pull_request(head="mp/x", base="main", title="t", body="b")
    forge.checks["s"] = (Check("test", "check_run", CheckState.PENDING, "queued", "u", ""),)
    assert forge.ci("s").changed and not forge.ci("s").changed
