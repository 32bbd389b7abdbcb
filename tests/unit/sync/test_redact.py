"""Redaction of secret values, recognisable tokens and their base64 forms."""

from __future__ import annotations

import base64
import json

import pytest

from mp_engine.config import Config
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
