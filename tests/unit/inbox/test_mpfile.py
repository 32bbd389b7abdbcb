"""The MP file format (docs/PROTOCOL.md, "The MP file")."""

from __future__ import annotations

import pytest

from mp_engine.core.errors import InvalidMPError
from mp_engine.execute.shell import require_executable
from mp_engine.inbox.mpfile import parse

GOOD = b"""
# MP-1.4 Add a greeting
Timeout: 300
step-timeout: 20
Approves: MP-1.3

Some prose for humans.

```file out/greeting.txt
hello
```

```bash
cat out/greeting.txt
```

```sh
echo plain sh
```

```python
print("a python step")
```

```text
not executed
```

## Validate

```bash
test -s out/greeting.txt
```
"""


def test_parses_header_keys_steps_and_checks_in_document_order():
    mp = parse(GOOD)
    assert (mp.mp_id, mp.title) == ("MP-1.4", "Add a greeting")
    assert mp.headers == {"Timeout": 300.0, "Step-Timeout": 20.0, "Approves": "MP-1.3"}
    assert [(b.kind, b.step_id) for b in mp.steps] == [
        ("file", "step-001"),
        ("command", "step-002"),
        ("command", "step-003"),
        ("command", "step-004"),
    ]
    assert mp.steps[0].path == "out/greeting.txt" and mp.steps[0].body == "hello\n"
    assert (mp.steps[1].lang, mp.steps[2].lang, mp.steps[3].lang) == ("bash", "sh", "py")
    assert [(c.step_id, c.body) for c in mp.checks] == [("check-001", "test -s out/greeting.txt")]
    assert any("```text block is not executed" in n for n in mp.notes)
    assert mp.steps[1].line == 13


def test_validate_section_ends_at_a_heading_of_the_same_level():
    mp = parse(b"# MP-2.0\n\n## Validate\n```bash\ntrue\n```\n## More steps\n```bash\necho after\n```\n")
    assert [c.body for c in mp.checks] == ["true"]
    assert [s.body for s in mp.steps] == ["echo after"]


def test_indented_fences_inside_a_list_are_steps():
    mp = parse(b"# MP-2.1\n\n1. first\n   ```bash\n   echo one\n   ```\n")
    assert mp.steps[0].body == "echo one"


def test_crlf_and_bom_are_accepted():
    mp = parse(b"\xef\xbb\xbf# MP-3.1 Title\r\n\r\n```bash\r\necho hi\r\n```\r\n")
    assert mp.mp_id == "MP-3.1" and mp.steps[0].body == "echo hi"


def test_header_keys_further_down_are_notes_not_headers():
    mp = parse(b"# MP-3.2\n\nTimeout: 5\n```bash\ntrue\n```\n")
    assert "Timeout" not in mp.headers
    assert any("not directly under the title" in n for n in mp.notes)


@pytest.mark.parametrize(
    "data, reason, line",
    [
        (b"", "empty", None),
        (b"   \n\n", "empty", None),
        (b"hello\n# MP-1.0\n", "not an `# MP-<major>.<minor>` header", 1),
        (b"# MP-1\n```bash\ntrue\n```\n", "not an `# MP-<major>.<minor>` header", 1),
        (b"# Project 1.2\n", "not an `# MP-<major>.<minor>` header", 1),
        (b"# MP-1.2\x00\n", "binary", None),
        (b"# MP-1.2\n\xff\xfe\n", "not valid UTF-8", None),
        (b"# MP-1.2\nColour: blue\n", "unknown header key 'Colour'", 2),
        (b"# MP-1.2\nTimeout: soon\n", "header `Timeout: soon` is invalid", 2),
        (b"# MP-1.2\nTimeout: 5\nTimeout: 6\n", "appears twice", 3),
        (b"# MP-1.2\nApproves: yesterday\n", "header `Approves: yesterday` is invalid", 2),
        (b"# MP-1.2\n\n```bash\necho half", "never closed", 3),
        (b"# MP-1.2\n\n```file\nx\n```\n", "has no path", 3),
        (b"# MP-1.2\n## Validate\n```file a.txt\nx\n```\n", "inside the Validate section", 3),
    ],
)
def test_invalid_files_give_a_reason_a_fix_and_a_line(data, reason, line):
    with pytest.raises(InvalidMPError) as info:
        parse(data)
    assert reason in info.value.reason
    assert info.value.fix  # exactly one proposed fix, never empty
    assert info.value.line == line


def test_unknown_key_message_names_the_known_keys():
    with pytest.raises(InvalidMPError) as info:
        parse(b"# MP-1.2\nColour: blue\n")
    for key in ("Timeout", "Step-Timeout", "Approves", "Executor"):
        assert key in info.value.reason


def test_size_cap():
    with pytest.raises(InvalidMPError, match="over the 100-byte cap"):
        parse(b"# MP-1.0\n" + b"x" * 200, max_bytes=100)


def test_nothing_executable_is_an_error_with_a_fix():
    mp = parse(b"# MP-1.0 Only prose\n\nPlease do something.\n")
    with pytest.raises(InvalidMPError) as info:
        require_executable(mp)
    assert "nothing to execute" in info.value.reason
    assert "```bash" in info.value.fix


def test_sha256_is_of_the_raw_bytes():
    import hashlib

    assert parse(GOOD).sha256 == hashlib.sha256(GOOD).hexdigest()


def test_an_mp_of_more_than_10000_blocks_is_refused_with_the_fix():
    with pytest.raises(InvalidMPError) as e:
        parse(b"# MP-1.0 Many\n\n" + b"```bash\ntrue\n```\n" * 10_001, max_bytes=1 << 20)
    assert "more than 10,000 code blocks" in e.value.reason and "Split the work" in e.value.fix
    assert len(parse(b"# MP-1.0 Many\n\n" + b"```bash\ntrue\n```\n" * 10_000, max_bytes=1 << 20).steps) == 10_000


def test_misplaced_header_keys_are_noted_up_to_twenty_times():
    mp = parse(b"# MP-1.0 Keys\n\nProse.\n" + b"Timeout: 5\n" * 50 + b"```bash\ntrue\n```\n")
    assert len(mp.notes) == 20 and mp.notes[0].startswith("line 4: `Timeout:` looks like a header")
    assert mp.notes[-1].startswith("line 23 and maybe more:")


def test_the_instruction_text_is_built_on_demand_from_line_ranges():
    mp = parse(b"# MP-1.0 T\n\nDo it.\n\n```bash\nmake\n```\n## Validate\n```bash\ntrue\n```\n## After\nmore\n")
    assert mp.instruction_ranges == ((1, 7), (11, 14))  # [start, end) line indexes
    assert mp.body == (
        (2, ""),
        (3, "Do it."),
        (4, ""),
        (5, "```bash"),
        (6, "make"),
        (7, "```"),
        (12, "## After"),
        (13, "more"),
        (14, ""),
    )


def test_parse_head_reads_the_header_and_not_the_body():
    from mp_engine.inbox.mpfile import parse_head

    data = b"\n\n# MP-2.3 Title here\nApproves: MP-2.2\n\n```bash\nnever closed\n"
    assert parse_head(data) == ("MP-2.3", "Title here", {"Approves": "MP-2.2"})
    with pytest.raises(InvalidMPError):
        parse(data)
