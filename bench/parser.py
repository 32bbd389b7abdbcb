"""13. Parsing a hostile 1 MiB MP, against a benign 1 MiB MP.

`mpfile.parse` in this process on 1 MiB inputs built to cost the parser the most: a line
of interest every few bytes (Validate headings opened and closed, `#` lines, key-like
lines), a million empty lines, 10,000 tiny blocks, a block of 250,000 indented lines,
a fence or heading line of 1 MB of blanks. The value is the slowest shape's best of N
runs. Baseline: a benign MP of the same size (prose, lists, 800 blocks of 20 lines).
Target (issue #20): under 100 ms; the line-by-line parser took 463 ms on 50,000 tiny
blocks, and the regex parser before it minutes on a long fence line.
"""

from __future__ import annotations

import os
import time

from bench.common import Row, Stat
from mp_engine.core.errors import InvalidMPError
from mp_engine.inbox.mpfile import parse

MIB = 1 << 20
HEAD = b"# MP-1.1 hostile\n\n"


def _fill(unit: bytes, tail: bytes = b"") -> bytes:
    return HEAD + unit * ((MIB - len(HEAD) - len(tail)) // len(unit)) + tail


def hostile() -> dict[str, bytes]:
    return {
        "10,000 tiny blocks and more": _fill(b"```bash\nx\n```\n"),
        "9,999 blocks, then prose": HEAD + b"```bash\nx\n```\n" * 9999 + b"x\n" * ((MIB - 150_000) // 2),
        "empty lines": _fill(b"\n", b"```bash\ntrue\n```\n"),
        "Validate headings": _fill(b"# Validate\n"),
        "Validate opened and closed": _fill(b"## Validate\n# x\n"),
        "misplaced header keys": _fill(b"Timeout: 5\n"),
        "key-like prose": _fill(b"a:\n"),
        "`#` lines": _fill(b"#\n"),
        "fence-like lines in one block": HEAD + b"```bash\n" + b"````x`\n" * ((MIB - 40) // 7) + b"```\n",
        "an indented block": HEAD + b"  ```bash\n" + b"  x\n" * ((MIB - 40) // 4) + b"  ```\n",
        "a fence line of blanks": HEAD + b"```" + b" " * (MIB - 40) + b"`\n",
        "a heading line of blanks and hashes": HEAD + b"# " + b" #" * ((MIB - 40) // 2) + b"x\n",
    }


def benign() -> bytes:
    para = (
        b"This paragraph explains what the next step does and why it matters for the build.\n"
        b"It wraps over a few lines, as prose in a Markdown file does, with `code` and *emphasis*.\n\n"
        b"- a list item naming src/app.py\n- another one\n\n"
    )
    block = b"```bash\n" + b"echo building part of the project && make -C src all\n" * 20 + b"```\n\n"
    unit = b"## Step\n\n" + para + block
    tail = b"## Validate\n\n```bash\ntrue\n```\n"
    return HEAD + unit * ((MIB - len(HEAD) - len(tail)) // len(unit)) + tail


def best_ms(data: bytes, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        try:
            parse(data, max_bytes=2 * MIB)
        except InvalidMPError:
            pass
        best = min(best, (time.perf_counter() - t) * 1000)
    return best


def run(reps: int) -> list[Row]:
    times = {name: best_ms(data, reps) for name, data in hostile().items()}
    worst = max(times, key=times.__getitem__)
    base = best_ms(benign(), reps)
    return [
        Row(
            "13. parse a hostile 1 MiB MP, slowest of 12 shapes",
            Stat(times[worst], times[worst], reps),
            "benign 1 MiB MP",
            Stat(base, base, reps),
            "<= 100 ms",
            times[worst] <= 100,
            note=f"slowest: {worst}; "
            + ", ".join(f"{n} {t:.0f}" for n, t in sorted(times.items(), key=lambda x: -x[1])[1:4]),
        )
    ]


if __name__ == "__main__":  # pragma: no cover
    print(run(int(os.environ.get("REPS", "5"))))
