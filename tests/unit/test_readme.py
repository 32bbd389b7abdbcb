"""README.md as a newcomer reads it from a clone (issue #44): what it tells them to type
must work there."""

from __future__ import annotations

import re

from tests.conftest import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()


def test_extras_install_from_the_clone_since_the_package_is_not_on_pypi():
    assert "pip install 'mp-engine[" not in README and "pip install mp-engine" not in README
    assert ".venv/bin/pip install -e '.[mcp]'" in " ".join(README.split())


def test_the_example_mp_s_id_does_not_read_as_the_protocol_s_version():
    example = README.split("## Writing an MP", 1)[1].split("````markdown\n", 1)[1]
    mp_id = re.match(r"# (MP-\d+\.\d+)", example)[1]
    assert mp_id != "MP-1.3" and not mp_id.startswith("MP-1."), mp_id
    assert "not a protocol version" in README


def test_it_says_what_ci_runs_besides_make_test():
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert "apt-get install" in ci and ci.rstrip().endswith("exec make test")
    said = " ".join(README.split())
    assert "CI runs `.ci/run`, which first installs the system packages" in said
    assert "(what CI runs: .ci/run)" not in README
