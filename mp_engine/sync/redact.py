"""Redaction: secrets never leave the machine (issue #3).

A `Redactor` masks, in any text the engine is about to write where git will carry it
(RESULT_last.md, the run archive, the event log):
  - the values of secret environment variables (named in `[secrets] env`, or matching
    `[secrets] env_patterns`), also JSON-escaped;
  - recognisable tokens: GitHub tokens, AWS access key ids and secret keys, private-key
    blocks;
  - the base64 forms of both: a secret value is masked inside any base64 stream whatever
    its alignment, and a base64 run that decodes to a token is masked whole.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Iterable, Mapping

from mp_engine import secretenv
from mp_engine.atomic import atomic_write
from mp_engine.config import Config

MASK = "[REDACTED]"

TOKEN_PATTERNS = [
    re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----", re.S
    ),
    # No leading \b: inside JSON a token often follows an escape such as `\n`.
    re.compile(r"gh[pousr]_[A-Za-z0-9]{36,255}(?![A-Za-z0-9])"),
    re.compile(r"github_pat_[A-Za-z0-9_]{22,255}(?![A-Za-z0-9_])"),
    re.compile(r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}(?![A-Z0-9])"),
    # An AWS secret access key is 40 base64 characters; only mask it where it is named.
    re.compile(r"(?i)(?<=aws_secret_access_key)(\s*[=:]\s*[\"']?)[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])"),
]
# Long enough that a decoded run can hold a token; `-_` for the URL-safe alphabet.
BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{24,}={0,2}")


def _b64_fragments(value: bytes) -> set[str]:
    """The parts of `base64(prefix + value + suffix)` that depend only on `value`, for each
    of the three alignments a value can have inside a longer base64 stream."""
    out = {base64.b64encode(value).decode(), base64.urlsafe_b64encode(value).decode()}  # the common, whole case
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + value).decode()
        first = -(-k // 3)  # first 3-byte group fully inside the value
        last = (k + len(value)) // 3 - 1  # last full group inside it
        if last >= first:
            frag = enc[4 * first : 4 * (last + 1)]
            if len(frag) >= 8:
                out.add(frag)
                out.add(frag.replace("+", "-").replace("/", "_"))
    return out


class Redactor:
    """Callable `text -> text` that masks secrets; cheap when there is nothing to mask."""

    def __init__(self, values: Iterable[str] = (), *, min_length: int = 8):
        literals: set[str] = set()
        for v in values:
            if not v or len(v) < min_length:
                continue
            literals.add(v)
            escaped = json.dumps(v, ensure_ascii=False)[1:-1]
            literals.add(escaped)
            literals |= _b64_fragments(v.encode("utf-8"))
        # Longest first, so a value is masked whole rather than around a shorter one.
        self._literals = sorted(literals, key=len, reverse=True)
        self._literal_re = re.compile("|".join(re.escape(s) for s in self._literals)) if self._literals else None

    @classmethod
    def from_config(cls, config: Config, environ: Mapping[str, str] | None = None) -> Redactor:
        environ = secretenv.environ() if environ is None else environ
        cfg = config.secrets
        names = sorted(n for n in environ if secretenv.is_secret(n, cfg.env, cfg.env_patterns))
        return cls((environ[n] for n in names), min_length=cfg.min_length)

    def __call__(self, text: str) -> str:
        if self._literal_re is not None:
            text = self._literal_re.sub(MASK, text)
        for pattern in TOKEN_PATTERNS:
            text = pattern.sub(_mask_keeping_prefix, text)
        return BASE64_RUN.sub(self._mask_encoded_token, text)

    def _mask_encoded_token(self, m: re.Match[str]) -> str:
        run = m.group(0)
        for candidate in (run, run.replace("-", "+").replace("_", "/")):
            try:
                decoded = base64.b64decode(candidate + "=" * (-len(candidate) % 4), validate=True)
            except (binascii.Error, ValueError):
                continue
            text = decoded.decode("utf-8", errors="ignore")
            if any(p.search(text) for p in TOKEN_PATTERNS):
                return MASK
        return run


def _mask_keeping_prefix(m: re.Match[str]) -> str:
    # The AWS-secret pattern captures the `= "` between the name and the value; keep it.
    return (m.group(1) if m.re.groups else "") + MASK


def redact_file(path: os.PathLike[str] | str, redact: Redactor) -> bool:
    """Mask secrets inside a text file in place (atomically); True if it changed."""
    try:
        raw = open(path, "rb").read()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    clean = redact(text)
    if clean == text:
        return False
    atomic_write(path, clean)
    return True
