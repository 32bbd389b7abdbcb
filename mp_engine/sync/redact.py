"""Redaction: secrets never leave the machine (issues #3, #20).

A `Redactor` masks, in any text the engine is about to write where git will carry it
(RESULT_last.md, the run archive, the event log):
  - the values of secret environment variables (named in `[secrets] env`, or matching
    `[secrets] env_patterns`; `secretenv.environ()` holds them), in every form a step is
    likely to print them: as they are, JSON-escaped, URL-encoded, hex, and base64 at each
    of the three alignments a value can have inside a longer stream (both alphabets);
  - any of those forms split across lines: line-wrapped base64 (`base64` wraps at 76
    columns, PEM at 64) or a value printed in pieces. Line breaks (`\\n`, `\\r`, and their
    JSON escapes) are taken out before the search and the masks put back over the
    original text, so a break can fall anywhere;
  - recognisable tokens: GitHub tokens, AWS access key ids and secret keys, private-key
    blocks, and base64 runs (line-wrapped too) that decode to one of them.

`redact_file` streams a file in chunks with an overlap, so memory stays flat whatever the
size of a step's output.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from urllib.parse import quote, quote_plus

from mp_engine.config.load import Config
from mp_engine.core import secretenv
from mp_engine.core.atomic import atomic_write

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
# Long enough that a decoded run can hold a token; `-_` for the URL-safe alphabet. Lines
# of a wrapped stream join the run (each continuation starts with a line break, so the
# match is unambiguous and linear).
BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{24,}(?:\r?\n[A-Za-z0-9+/_-]{4,})*={0,2}")
# Taken out of text and values before the literal search: a secret may be split anywhere.
BREAKS = re.compile(r"\r|\n|\\r|\\n")
CHUNK = 512 << 10  # characters a file is read in
OVERLAP = 64 << 10  # kept from one chunk to the next: longer than any form of a secret or key block
MAX_VALUE = 4096  # longer values are masked as they are only (their encodings would exceed the overlap)


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


def _lower_escapes(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), text)


def forms(value: str) -> set[str]:
    """The strings a step may print for `value`: plain, JSON-escaped, URL-encoded (both
    cases of the escapes), hex (both cases), base64 fragments."""
    out = {value, json.dumps(value, ensure_ascii=False)[1:-1]}
    if len(value) > MAX_VALUE:
        return out
    for encoded in (quote(value, safe=""), quote(value), quote_plus(value)):
        out |= {encoded, _lower_escapes(encoded)}
    raw = value.encode("utf-8")
    out |= {raw.hex(), raw.hex().upper()}
    return out | _b64_fragments(raw)


class Redactor:
    """Callable `text -> text` that masks secrets; cheap when there is nothing to mask."""

    def __init__(self, values: Iterable[str] = (), *, min_length: int = 8):
        literals: set[str] = set()
        for v in values:
            if v and len(v) >= min_length:
                literals |= {BREAKS.sub("", f) for f in forms(v)}
        literals.discard("")
        # Longest first, so a value is masked whole rather than around a shorter one.
        ordered = sorted(literals, key=len, reverse=True)
        self._literal_re = re.compile("|".join(re.escape(s) for s in ordered)) if ordered else None

    @classmethod
    def from_config(cls, config: Config, environ: Mapping[str, str] | None = None) -> Redactor:
        environ = secretenv.environ() if environ is None else environ
        cfg = config.secrets
        names = sorted(n for n in environ if secretenv.is_secret(n, config.secret_names, cfg.env_patterns))
        return cls((environ[n] for n in names), min_length=cfg.min_length)

    def __call__(self, text: str) -> str:
        return _mask(text, self.spans(text))

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where `text` holds a secret: sorted, disjoint `(start, end)` ranges."""
        found: list[tuple[int, int]] = self._literal_spans(text)
        for pattern in TOKEN_PATTERNS:
            # The AWS-secret pattern captures the `= "` between the name and the value; keep it.
            found += [(m.end(1) if m.re.groups else m.start(), m.end()) for m in pattern.finditer(text)]
        found += [m.span() for m in BASE64_RUN.finditer(text) if _decodes_to_token(m.group(0))]
        return _merge(found)

    def _literal_spans(self, text: str) -> list[tuple[int, int]]:
        if self._literal_re is None:
            return []
        squeezed = BREAKS.sub("", text)
        matches = [m.span() for m in self._literal_re.finditer(squeezed)]
        if not matches or len(squeezed) == len(text):
            return matches
        # Map each match back over the original text, walking the breaks once: a kept
        # character's original index is its squeezed index plus what was removed before it.
        wanted = sorted({i for start, end in matches for i in (start, end - 1)})
        original: dict[int, int] = {}
        breaks, removed = BREAKS.finditer(text), 0
        following = next(breaks, None)
        for i in wanted:
            while following is not None and following.start() - removed <= i:
                removed += following.end() - following.start()
                following = next(breaks, None)
            original[i] = i + removed
        return [(original[start], original[end - 1] + 1) for start, end in matches]

    def stream(self, chunks: Iterable[str]) -> Iterator[str]:
        """The masked text of a stream, chunk by chunk; holds one chunk and the overlap."""
        return (masked for masked, _ in self._scan(chunks))

    def finds(self, chunks: Iterable[str]) -> bool:
        """True when the stream holds a secret; stops reading at the first."""
        return any(found for _, found in self._scan(chunks))

    def _scan(self, chunks: Iterable[str]) -> Iterator[tuple[str, bool]]:
        carry = ""
        for chunk in chunks:
            buf = carry + chunk
            cut = len(buf) - OVERLAP
            if cut <= 0:
                carry = buf
                continue
            spans = self.spans(buf)
            for start, end in spans:  # never cut through a mask
                if start < cut < end:
                    cut = end
            done = [s for s in spans if s[1] <= cut]
            yield _mask(buf[:cut], done), bool(done)
            carry = buf[cut:]
        spans = self.spans(carry)
        yield _mask(carry, spans), bool(spans)


def _decodes_to_token(run: str) -> bool:
    run = run.replace("\r", "").replace("\n", "")
    for candidate in (run, run.replace("-", "+").replace("_", "/")):
        try:
            decoded = base64.b64decode(candidate + "=" * (-len(candidate) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        text = decoded.decode("utf-8", errors="ignore")
        if any(p.search(text) for p in TOKEN_PATTERNS):
            return True
    return False


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    pieces, pos = [], 0
    for start, end in spans:
        pieces += [text[pos:start], MASK]
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces)


def _chunks(path: os.PathLike[str] | str) -> Iterator[str]:
    """The file's text, `CHUNK` characters at a time; UnicodeDecodeError if not UTF-8."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            yield decoder.decode(block)
    yield decoder.decode(b"", final=True)


def redact_file(path: os.PathLike[str] | str, redact: Redactor) -> bool:
    """Mask secrets inside a text file in place (atomically); True if it changed. Streams:
    one pass looks, a second writes only when there is something to mask. A file that is
    not UTF-8 is left alone."""
    try:
        if not redact.finds(_chunks(path)):
            return False
        atomic_write(Path(path), (piece.encode("utf-8") for piece in redact.stream(_chunks(path))))
    except (OSError, UnicodeDecodeError):
        return False
    return True
