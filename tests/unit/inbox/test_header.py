"""The header: decoding the bytes, the `# MP-X.Y Title` line, and the `Key: value` lines."""

from __future__ import annotations

import pytest

from mp_engine.core.errors import InvalidMPError
from mp_engine.inbox.header import decode, is_header_key, parse_header_line, parse_headers


@pytest.mark.parametrize(
    ("line", "mp_id", "title"),
    [
        ("# MP-1.4 Add a greeting", "MP-1.4", "Add a greeting"),
        ("# MP-12.03 — Dash separated", "MP-12.03", "Dash separated"),
        ("#\tMP-2.0: colon", "MP-2.0", "colon"),
        ("# MP-3.1", "MP-3.1", ""),
    ],
)
def test_the_first_non_blank_line_names_the_mp(line, mp_id, title):
    assert parse_header_line(["", "  ", line, "body"]) == (2, mp_id, title)


@pytest.mark.parametrize("line", ["# MP-1.4.2 three parts", "# MP-1.4x", "MP-1.4 no hash at all"])
def test_near_misses_are_not_headers(line):
    with pytest.raises(InvalidMPError) as e:
        parse_header_line([line])
    assert e.value.line == 1 and "`# MP-1.4 Short title`" in e.value.fix


@pytest.mark.parametrize(
    ("line", "meant"),
    [
        ("# MP 1.6 Typo", "# MP-1.6 Typo"),
        ("#MP-1.4", "# MP-1.4"),
        ("# mp-1.4 lower case", "# MP-1.4 lower case"),
        ("## MP-1.4 Two hashes", "# MP-1.4 Two hashes"),
        ("# MP-1_4: underscore", "# MP-1.4 underscore"),
    ],
)
def test_a_typo_in_the_header_gets_the_header_it_meant_as_the_fix(line, meant):
    with pytest.raises(InvalidMPError) as e:
        parse_header_line([line])
    assert e.value.fix == f"Write the first line as `{meant}`."


def test_the_near_miss_check_is_linear_on_hostile_input():
    from mp_engine.inbox.header import suggest_header

    assert suggest_header("#" + " " * 100_000 + "MP 1.2") is None
    assert suggest_header("# MP " + "9" * 100_000) is None


def test_decode_normalises_line_endings_and_a_bom():
    assert decode(b"\xef\xbb\xbf# MP-1.0\r\nA\rB\n", max_bytes=100) == "# MP-1.0\nA\nB\n"


def test_header_keys_are_case_insensitive_and_typed():
    lines = ["timeout: 30", "STEP-TIMEOUT: 5", "executor: Agent", "max-parallel: 2", "", "prose"]
    headers, end = parse_headers(lines, 0, "MP-1.0")
    assert headers == {"Timeout": 30.0, "Step-Timeout": 5.0, "Executor": "agent", "Max-Parallel": 2} and end == 4
    assert is_header_key("approves") and not is_header_key("Colour")


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("Timeout: -5", "must be a positive number of seconds"),
        ("Timeout: inf", "must be a positive number of seconds"),
        ("Timeout: soon", "must be a number of seconds, like 600 for ten minutes"),  # issue #44
        ("Timeout: 10m", "must be a number of seconds: write `600`, not `10m`"),
        ("Step-Timeout: 1.5 h", "write `5400`, not `1.5 h`"),
        ("Executor: docker", "must be `shell` or `agent`"),
        ("Approves: yesterday", "must name the failed MP"),
        ("Max-Parallel: 0", "must be a whole number, 1 or more"),
        ("Max-Parallel: four", "must be a whole number, 1 or more"),
        ("Max-Iterations: many", "must be a whole number, 1 or more"),
        ("Wall-Budget: 0", "must be a positive number of seconds"),
        ("Max-Cost-USD: free", "must be an amount of US dollars"),
        ("Max-Cost-USD: -1", "must be an amount of US dollars above 0"),
        ("Levels: a, a", "names a level twice"),
    ],
)
def test_a_bad_value_says_what_the_key_takes(line, reason):
    with pytest.raises(InvalidMPError) as e:
        parse_headers([line], 0, "MP-1.0")
    assert reason in e.value.reason and e.value.mp_id == "MP-1.0" and e.value.line == 1
    assert "could not convert" not in e.value.reason


def test_per_mp_settings_are_typed():
    headers, _ = parse_headers(
        ["Max-Iterations: 60", "Levels: aider, claude", "Wall-Budget: 900", "Max-Cost-USD: $2.50"], 0, "MP-1.0"
    )
    assert headers == {"Max-Iterations": 60, "Levels": ("aider", "claude"), "Wall-Budget": 900.0, "Max-Cost-USD": 2.5}


def test_approves_accepts_a_run_id_for_an_mp_that_had_no_readable_header():
    headers, _ = parse_headers(["Approves: 20261124T101500Z-UNPARSED"], 0, "MP-1.1")
    assert headers["Approves"] == "20261124T101500Z-UNPARSED"


@pytest.mark.parametrize("name", ["main", "release/2.0", "mp/MP-1.2", "feature/x_y-z"])
def test_base_takes_the_branches_git_takes(name):
    headers, _ = parse_headers([f"Base: {name}"], 0, "MP-1.1")
    assert headers == {"Base": name}


@pytest.mark.parametrize("name", ["-x", "a..b", "a b", "x.lock", "a/", "/a", ".a", "a//b", "a@{1}", "x~1", "a:b", "@"])
def test_base_refuses_what_git_would_refuse(name):
    with pytest.raises(InvalidMPError, match="must be a branch name"):
        parse_headers([f"Base: {name}"], 0, "MP-1.1")


def test_repo_and_issue_take_a_name_and_a_number():
    headers, _ = parse_headers(["Repo: my-app.2", "Issue: #41"], 0, "MP-1.1")
    assert headers == {"Repo": "my-app.2", "Issue": 41}
