"""pyproject.toml as pip and setuptools read it when a newcomer runs `make run`."""

from __future__ import annotations

import re
import tomllib

from tests.conftest import REPO_ROOT


def test_the_license_is_an_spdx_expression_and_the_backend_reads_it():
    # issue #44: the `{ text = "MIT" }` table made setuptools print its deprecation table,
    # twice, on every install; SPDX strings need setuptools 77 (PEP 639).
    doc = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert doc["project"]["license"] == "MIT"
    assert not any(c.startswith("License ::") for c in doc["project"].get("classifiers", []))
    backend = next(r for r in doc["build-system"]["requires"] if r.startswith("setuptools"))
    assert int(re.search(r">=(\d+)", backend)[1]) >= 77
