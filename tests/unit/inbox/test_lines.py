"""The line shapes of an MP (inbox/lines.py): what they recognise, and that hostile lines
cannot stall the parser (issue #20)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mp_engine.inbox.lines import fence_open, header_line, heading, key_line


@pytest.mark.parametrize(
    ("line", "want"),
    [
        ("```bash", ("", "```", "bash")),
        ("  ~~~~ file out/a.txt  ", ("  ", "~~~~", "file out/a.txt")),
        ("\t```", ("\t", "```", "")),
        ("``` bash `x`", None),  # a backtick in the info string: inline code, not a fence
        ("``bash", None),
        ("text ```", None),
    ],
)
def test_fences(line, want):
    got = fence_open(line)
    assert (got.indent, got.marker, got.info) == want if want else got is None


def test_a_fence_closes_with_the_same_character_at_least_as_many_times():
    fence = fence_open("````python")
    assert fence.closes("````") and fence.closes("  `````  ")
    assert not fence.closes("```") and not fence.closes("~~~~") and not fence.closes("```` x")


def test_headings_headers_and_key_lines():
    assert heading("## Validate ##") == (2, "Validate")
    assert heading("#NoSpace") is None and heading("####### seven") is None and heading("#") is None
    assert header_line("# MP-1.4  Add a greeting  ") == ("MP-1.4", "Add a greeting")
    assert header_line("# MP-1.4.2") is None and header_line("## MP-1.4") is None
    assert key_line("Timeout:  300 ") == ("Timeout", "300") and key_line("1abc: x") is None


HOSTILE = {
    "fence of blanks then a backtick": b"# MP-1.1 x\n\n```" + b" " * 1_000_000 + b"`\n",
    "blanks, a fence, blanks, a backtick": b"# MP-1.1 x\n\n" + b" " * 500_000 + b"```" + b" " * 500_000 + b"`\n",
    "a heading of blanks and hashes": b"# MP-1.1 x\n\n# " + b" #" * 500_000 + b"x\n```bash\ntrue\n```\n",
    "a key line of blanks": b"# MP-1.1 x\nTimeout: 1" + b" " * 1_000_000 + b"x\n",
    "a 1 MB title": b"# MP-1.1 " + b"a " * 500_000 + b"\n```bash\ntrue\n```\n",
    # A line of interest every few bytes: each costs the parser a step in Python.
    "Validate headings opened and closed": b"# MP-1.1 x\n\n" + b"## Validate\n# x\n" * 60_000,
    "a million empty lines": b"# MP-1.1 x\n" + b"\n" * 1_000_000 + b"```bash\ntrue\n```\n",
    "10,000 blocks and one more": b"# MP-1.1 x\n\n" + b"```bash\nx\n```\n" * 10_001,
    "misplaced header keys": b"# MP-1.1 x\n\n" + b"Timeout: 5\n" * 90_000,
    "an indented block of 250,000 lines": b"# MP-1.1 x\n\n  ```bash\n" + b"  x\n" * 250_000 + b"  ```\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_1_mb_mp_is_parsed_not_a_hang(name, tmp_path):
    """Hang detection, not a speed target: linear parsing takes milliseconds here, the
    old backtracking regexes took hours on these inputs. The child is killed after 60 s."""
    path = tmp_path / "mp.txt"
    path.write_bytes(HOSTILE[name])
    code = (
        "import sys\nfrom mp_engine.core.errors import InvalidMPError\nfrom mp_engine.inbox.mpfile import parse\n"
        "try:\n    parse(open(sys.argv[1], 'rb').read(), max_bytes=2_000_000)\nexcept InvalidMPError:\n    pass\n"
        "print('parsed')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "parsed", proc.stderr


def test_the_lines_of_interest_are_found_by_one_search_each():
    from mp_engine.inbox.lines import closing_fence, dedent, interesting

    text = "prose\n  ```bash\nTimeout: 3\n## Validate\n# \u00a0Validate\n### deep\n# Other\n~~~\n```x`\n"
    found = [
        (m.lastgroup, text[m.start() : text.find("\n", m.start())])
        for m in interesting(None, ("Timeout",)).finditer(text)
    ]
    assert found == [
        ("fence", "  ```bash"),
        ("key", "Timeout: 3"),
        ("valid", "## Validate"),
        ("head", "# \u00a0Validate"),  # a Unicode blank: `heading` decides
        ("fence", "~~~"),
    ]
    inside = [(m.lastgroup, m.start()) for m in interesting(2, ()).finditer("### deep\n# Other\n## Validate\n")]
    assert inside == [("other", 9), ("valid", 17)]
    fence = fence_open("  ````bash")
    assert closing_fence(fence).search("```\n ````` \n").start() == 4
    assert dedent("  ", "  a\n    b\n\tc\n d") == "a\n  b\nc\nd"
