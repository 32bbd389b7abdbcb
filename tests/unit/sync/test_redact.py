"""Redaction of secret values, recognisable tokens and their base64 forms."""

from __future__ import annotations

import base64
import json

import pytest

from mp_engine.config.load import Config
from mp_engine.sync.redact import MASK, Redactor

GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
PEM = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nQUFBQUFB\n-----END OPENSSH PRIVATE KEY-----"


def test_env_values_named_or_matching_a_pattern_are_masked():
    env = {"DEPLOY_TOKEN": "s3cr3t-value-42", "MY_VAR": "not-secret-at-all", "CUSTOM": "hunter2hunter2"}
    r = Redactor.from_config(Config.model_validate({"secrets": {"env": ["CUSTOM"]}}), env)
    out = r("token=s3cr3t-value-42 custom=hunter2hunter2 var=not-secret-at-all")
    assert out == f"token={MASK} custom={MASK} var=not-secret-at-all"


def test_short_values_are_left_alone():
    r = Redactor.from_config(Config(), {"X_TOKEN": "abc"})
    assert r("abc abc") == "abc abc"


@pytest.mark.parametrize("secret", [GH, AWS_ID, PEM, "github_pat_" + "x" * 30])
def test_recognisable_tokens_are_masked(secret):
    out = Redactor()(f"before {secret} after")
    assert secret not in out and MASK in out and out.startswith("before ") and out.endswith(" after")


def test_aws_secret_key_is_masked_where_named():
    out = Redactor()(f"aws_secret_access_key = {AWS_SECRET}\nother {AWS_SECRET[:10]}")
    assert AWS_SECRET not in out and f"aws_secret_access_key = {MASK}" in out


@pytest.mark.parametrize("prefix", [b"", b"x", b"xy", b"prefix: "])
def test_base64_of_an_env_secret_is_masked_at_any_alignment(prefix):
    secret = "correct-horse-battery-staple"
    r = Redactor([secret])
    encoded = base64.b64encode(prefix + secret.encode() + b" trailing bytes").decode()
    out = r(f"blob {encoded} end")
    assert MASK in out and encoded not in out
    # No 12-character window of the encoded secret survives.
    core = base64.b64encode(secret.encode()).decode()[4:-4]
    assert not any(core[i : i + 12] in out for i in range(len(core) - 12))


def test_base64_of_a_token_is_masked():
    encoded = base64.b64encode(f"machine github.com password {GH}".encode()).decode()
    out = Redactor()(f"netrc={encoded}")
    assert out == f"netrc={MASK}"


def test_json_escaped_secret_in_an_event_line_is_masked_and_json_stays_valid():
    secret = 'pa"ss\\word-123'
    r = Redactor([secret])
    line = json.dumps({"event": "x", "error": f"failed with {secret}\n{PEM}"})
    out = r(line)
    data = json.loads(out)
    assert secret not in data["error"] and "PRIVATE KEY" not in data["error"]


def test_a_token_after_a_json_escape_is_masked():
    line = json.dumps({"stdout": f"token:\n{GH}\n{AWS_ID}\n"})
    out = Redactor()(line)
    assert GH not in out and AWS_ID not in out and json.loads(out)["stdout"].count(MASK) == 2


def test_redact_file_masks_in_place_and_leaves_binary_alone(tmp_path):
    from mp_engine.sync.redact import redact_file

    r = Redactor.from_config(Config(), {"DEPLOY_TOKEN": "tok-1234567890abcdef"})
    text = tmp_path / "out.txt"
    text.write_text("using tok-1234567890abcdef now\n")
    assert redact_file(text, r) and text.read_text() == f"using {MASK} now\n"
    assert not redact_file(text, r)  # nothing left: untouched
    blob = tmp_path / "out.bin"
    blob.write_bytes(b"\xff\xfetok-1234567890abcdef")
    assert not redact_file(blob, r) and blob.read_bytes().endswith(b"tok-1234567890abcdef")
    assert not redact_file(tmp_path / "missing", r)


SECRET = "sk-live/Zq9+x7_w0rd-2026"  # `/` and `+`: URL encoding changes it


@pytest.mark.parametrize("width", [76, 64])
@pytest.mark.parametrize("prefix", [b"", b"x", b"xy", b"a longer prefix: "])
def test_line_wrapped_base64_of_a_secret_is_masked(width, prefix):
    """`base64` wraps at 76 columns, PEM and `openssl base64` at 64: the break can fall
    anywhere inside the secret's encoding."""
    encoded = base64.b64encode(prefix + b"some bytes before " * 3 + SECRET.encode() + b" and after").decode()
    wrapped = "\n".join(encoded[i : i + width] for i in range(0, len(encoded), width))
    out = Redactor([SECRET])(f"$ base64 creds.txt\n{wrapped}\n$ echo done\n")
    flat = out.replace("\n", "")
    core = base64.b64encode(SECRET.encode()).decode()[4:-4]
    assert MASK in out and not any(core[i : i + 8] in flat for i in range(len(core) - 8))
    assert out.startswith("$ base64 creds.txt\n") and out.endswith("\n$ echo done\n")


def test_a_secret_split_across_up_to_three_lines_is_masked_also_json_escaped():
    pieces = [SECRET[:7], SECRET[7:15], SECRET[15:]]
    r = Redactor([SECRET])
    for sep in ("\n", "\r\n"):
        printed = "part: " + sep.join(pieces) + sep + "next line"
        out = r(printed)
        assert out == f"part: {MASK}{sep}next line"
        assert r(json.dumps({"stdout": printed})) == json.dumps({"stdout": out})


def test_url_encoded_and_hex_forms_are_masked():
    import re
    from urllib.parse import quote, quote_plus

    r = Redactor([SECRET + " x"])
    value = SECRET + " x"
    for form in (
        quote(value, safe=""),
        re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(value, safe="")),
        quote_plus(value),
        value.encode().hex(),
        value.encode().hex().upper(),
    ):
        assert r(f"url=https://h/?k={form}&next=1") == f"url=https://h/?k={MASK}&next=1", form


def test_a_stream_is_masked_as_the_whole_text_whatever_the_chunking():
    import random

    from mp_engine.sync.redact import OVERLAP

    rng = random.Random(7)
    r = Redactor([SECRET])
    parts, size = [], 0
    while size < 4 * OVERLAP:
        token = rng.choice([SECRET, SECRET[:9] + "\n" + SECRET[9:], GH])  # a token ends at a word's end
        piece = rng.choice(["log line ok\n", "x" * rng.randint(1, 300), token + " "])
        parts.append(piece)
        size += len(piece)
    text = "".join(parts)
    whole = r(text)
    assert SECRET not in whole and GH not in whole
    for _ in range(3):
        cuts = sorted(rng.sample(range(1, len(text)), 40))
        chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        assert "".join(r.stream(chunks)) == whole


def test_redact_file_streams_in_bounded_memory(tmp_path):
    """A 24 MB output is masked with a few chunks' worth of memory, not the file's size."""
    import tracemalloc

    from mp_engine.sync.redact import CHUNK, redact_file

    path = tmp_path / "stdout.log"
    line = "2026-11-25 12:00:00 INFO item processed, all fine\n"
    block = line * (CHUNK // len(line))
    with open(path, "w") as f:
        for i in range(48):
            f.write(block if i != 29 else block[: len(block) // 2] + f"leak {SECRET}\n" + block[len(block) // 2 :])
    size = path.stat().st_size
    tracemalloc.start()
    try:
        assert redact_file(path, Redactor([SECRET]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * CHUNK < size / 4, peak
    text = path.read_text()
    assert SECRET not in text and f"leak {MASK}\n" in text and len(text) == size - len(SECRET) + len(MASK)
