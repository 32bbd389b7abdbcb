"""What the agent said, without what it echoed of its own prompt (issue #16).

Some CLIs print the prompt they were given: `codex exec` writes the user prompt to stderr,
and any wrapper script may `cat` it. The prompt holds the completion protocol with the
run's real nonce (`<blocked nonce="N">what you need</blocked>`), and the MP's own text (which
may well mention "rate limit" or "HTTP 429"). Read naively, every codex iteration ended
BLOCKED and an MP about rate limits looked rate limited. So before the output is read:

  - `for_claims()`: each verbatim copy of the prompt is cut out, and so is every line that
    is one of the protocol's own example claims (they carry the nonce). The agent's real
    status block repeats some prompt lines (`NONCE: N`), so lines are not removed wholesale;
  - `for_limits()`: additionally every line that also occurs in the prompt is dropped, so a
    limit, an auth failure or an outage is recognised only in what the CLI itself printed.
"""

from __future__ import annotations

import re

CLAIM_LINE_RE = re.compile(r"<(mt_complete|blocked|aligned|drifted)\b[^>]*>.*</\1\s*>", re.I)  # claims, verdicts


def _cut_copies(text: str, prompt: str) -> str:
    for copy in {prompt, prompt.strip()}:
        if len(copy) >= 40 and copy in text:
            text = text.replace(copy, "")
    return text


def for_claims(text: str, prompt: str | None) -> str:
    """`text` without copies of `prompt` and without the protocol's example claim lines."""
    if not prompt:
        return text
    text = _cut_copies(text, prompt)
    examples = {line.strip() for line in prompt.splitlines() if CLAIM_LINE_RE.search(line)}
    if not examples:
        return text
    return "\n".join(line for line in text.splitlines() if line.strip() not in examples)


def for_limits(text: str, prompt: str | None) -> str:
    """`text` without anything that also appears in `prompt`, line by line."""
    if not prompt:
        return text
    text = _cut_copies(text, prompt)
    seen = {line.strip() for line in prompt.splitlines() if line.strip()}
    return "\n".join(line for line in text.splitlines() if line.strip() not in seen)
