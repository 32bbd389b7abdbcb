"""Fuzzing the MP parser with hypothesis (issue #20).

1. It reads every MP exactly as the line-by-line parser it replaced (reference_parser.py):
   the same steps, checks, instruction text and notes, or the same refusal. Inputs are
   drawn from the line shapes that matter (headings of every level and spelling, fences
   of both characters, lengths, indents and tags, header keys out of place, Unicode
   blanks), so the interesting interleavings come up in a few hundred examples.
2. It is linear: a drawn handful of those shapes, repeated to 256 KiB, parses or is
   refused with `InvalidMPError` (never another exception) within a bound per input.
   The bound is hang detection, 20 times what the slowest hostile MiB takes on a slow CI
   machine (bench figure 13 measures the speed); a backtracking or quadratic parser
   takes minutes on such input.
"""

from __future__ import annotations

import signal

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mp_engine.core.errors import InvalidMPError
from mp_engine.inbox.mpfile import parse
from tests.unit.inbox.reference_parser import reference_parse

HEADING = st.builds(
    lambda hashes, gap, name, tail: "#" * hashes + gap + name + tail,
    st.integers(0, 7),
    st.sampled_from(["", " ", "\t", "  ", " \u3000", "\u3000"]),
    st.sampled_from(["Validate", "validation", "VALIDATE", "Validated", "Checks", "validate x", ""]),
    st.sampled_from(["", ":", "::", " ##", ": #", " :", "\u00a0", " x"]),
)
FENCE = st.builds(
    lambda indent, char, n, info: indent + char * n + info,
    st.sampled_from(["", " ", "  ", "\t", "    "]),
    st.sampled_from(["`", "~"]),
    st.integers(2, 5),
    st.sampled_from(["", "bash", " sh ", "python", "file out.txt", "file", "js", "bash `x`", " ", "\t"]),
)
OTHER = st.sampled_from(
    [
        "",
        "prose",
        "  indented prose",
        "a: b",
        "Timeout: 5",
        "step-timeout : 9",
        "Approves:",
        "executor:agent",
        "Timeouts: 3",
        "echo hi",
        "\u3000",
        "- item",
    ]
)
LINE = st.one_of(HEADING, FENCE, OTHER)


def both(data: bytes) -> tuple[object, object]:
    try:
        mp = parse(data, max_bytes=1 << 24)
        new: object = {
            "steps": list(mp.steps),
            "checks": list(mp.checks),
            "body": list(mp.body),
            "notes": list(mp.notes),
        }
    except InvalidMPError as e:
        new = ("refused", e.reason.split(";")[0], e.line)
    try:
        old: object = reference_parse(data)
    except InvalidMPError as e:
        old = ("refused", e.reason.split(";")[0], e.line)
    return new, old


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LINE, min_size=1, max_size=40), st.sampled_from(["", "Timeout: 30\n"]))
# Inside a Validate section, a Validate heading with two blanks re-opens it (the blanks
# must not be given back to make it look like another heading).
@example(["## Validate", "#  Validate", "prose", "```bash", "true", "```"], "")
@example(["# Validate", "##\t Validation:", "## Other", "text"], "")
def test_the_linear_parser_reads_every_mp_as_the_line_by_line_one(lines, header):
    data = ("# MP-1.1 fuzz\n" + header + "\n" + "\n".join(lines) + "\n").encode()
    new, old = both(data)
    assert new == old, data.decode()


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang


@pytest.fixture
def alarm():
    previous = signal.signal(signal.SIGALRM, _alarm)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


BOUND = 2.0  # seconds for 256 KiB; the slowest hostile MiB takes about 0.12 s here


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.lists(LINE, min_size=1, max_size=4), st.integers(0, 3))
def test_any_repetition_of_line_shapes_parses_in_bounded_time(alarm, shapes, tail):
    unit = "\n".join(shapes) + "\n"
    body = unit * (256 * 1024 // len(unit) + 1)
    data = ("# MP-1.1 long\n\n" + body + ["", "```\n", "```bash\n", "## Validate\n"][tail]).encode()
    signal.setitimer(signal.ITIMER_REAL, BOUND)
    try:
        parse(data, max_bytes=1 << 24)
    except InvalidMPError:
        pass
    except Hang:
        pytest.fail(f"parsing {len(data):,} bytes of {shapes!r} took over {BOUND} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
