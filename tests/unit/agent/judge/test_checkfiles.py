"""The files an MP's checks run or collect (mp_engine/agent/judge/checkfiles.py): one
rule per kind of command, against the base's file list."""

from __future__ import annotations

from mp_engine.agent.judge.checkfiles import commands, judged_by
from mp_engine.inbox.mpfile import Block

FILES = [
    "check.sh",
    "scripts/verify.py",
    "env.sh",
    "src/app.py",
    "src/app_test.py",
    "tests/conftest.py",
    "tests/test_api.py",
    "tests/unit/test_model.py",
    "tests/helpers.py",
    "pyproject.toml",
    "conftest.py",
    "pkg/a/a.go",
    "pkg/a/a_test.go",
    "cmd/main_test.go",
    "web/app.test.js",
    "web/util.js",
    "package.json",
    "jest.config.js",
    "crates/tests/it.rs",
    "tests/it.rs",
    "Makefile",
    "out/a.txt",
]


def check(body: str, lang: str = "bash") -> Block:
    return Block(kind="check", index=1, line=1, body=body, lang=lang)


def judged(*bodies: str, lang: str = "bash") -> set[str]:
    return judged_by([check(b, lang) for b in bodies], FILES)


def test_a_check_that_only_reads_the_work_protects_nothing():
    assert judged("grep -qx hello out/a.txt", "test -f out/a.txt && cat src/app.py") == set()


def test_scripts_interpreters_and_sourced_files_are_protected():
    assert judged("./check.sh") == {"check.sh"}
    assert judged("python3 scripts/verify.py --strict") == {"scripts/verify.py"}
    assert judged("source env.sh && bash -e ./check.sh") == {"env.sh", "check.sh"}
    assert judged("FOO=1 timeout 60 python scripts/verify.py") == {"scripts/verify.py"}


def test_pytest_protects_what_it_collects_the_conftests_above_and_its_configuration():
    named = judged("pytest -q tests/unit")
    assert named == {"tests/unit/test_model.py", "tests/conftest.py", "conftest.py", "pyproject.toml"}
    assert "tests/helpers.py" not in judged("python -m pytest")  # not a test file
    assert {"tests/test_api.py", "src/app_test.py"} <= judged("uv run pytest")
    assert "tests/test_api.py" in judged("pytest tests/test_api.py::test_one -x")


def test_other_runners_protect_their_tests_and_configuration():
    assert judged("go test ./pkg/...") == {"pkg/a/a_test.go"}
    assert judged("go test ./...") == {"pkg/a/a_test.go", "cmd/main_test.go"}
    assert judged("npm test") == {"package.json", "jest.config.js", "web/app.test.js"}
    assert judged("cargo test") == {"tests/it.rs"}
    assert judged("make check") == {"Makefile"}


def test_a_python_check_protects_the_scripts_it_names():
    body = 'import subprocess\nsubprocess.run(["python3", "scripts/verify.py"], check=True)\nopen("out/a.txt")\n'
    assert judged(body, lang="py") == {"scripts/verify.py"}


def test_commands_split_on_shell_operators_and_keep_words():
    assert commands("a && b 'c d' | e; f # g\nh \\\n i") == [("a",), ("b", "c d"), ("e",), ("f",), ("h", "i")]
