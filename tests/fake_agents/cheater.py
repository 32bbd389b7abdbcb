#!/usr/bin/env python3
"""A fake agent that makes the checks pass by changing what judges them (issue #42): it
overwrites each --rewrite PATH with --content (a check's script, a CI workflow), skips the
work, and claims the micro-task done. --honest-from N: from iteration N on it does the
work instead (and leaves the judge alone)."""

import os
from pathlib import Path

import fakelib

opts = fakelib.options(
    [
        ("--rewrite", {"action": "append", "default": []}),
        ("--content", {"default": "exit 0\n"}),
        ("--honest-from", {"type": int, "default": 0}),
    ]
)
text = fakelib.prompt(opts)
fakelib.start(opts, text)
n = fakelib.nonce(text)
if opts.honest_from and int(os.environ.get("MP_ITERATION", "0")) >= opts.honest_from:
    files = fakelib.do_writes(text)
    print(f"I wrote {files} file(s).")
else:
    for rel in opts.rewrite:
        target = Path.cwd() / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(opts.content)
    files = len(opts.rewrite)
    print(f"I made the checks pass by editing {', '.join(opts.rewrite)}.")
print(fakelib.complete(n))
print(fakelib.status(n, "COMPLETE", files=files, summary="the checks pass"))
