#!/usr/bin/env python3
"""A fake agent that makes things worse: each call deletes one more of the files in
--victims (comma-separated), so one more check fails every iteration."""

from pathlib import Path

import fakelib

opts = fakelib.options([("--victims", {"required": True})])
text = fakelib.prompt(opts)
fakelib.start(opts, text)
n = fakelib.nonce(text)
for name in opts.victims.split(","):
    if Path(name).exists():
        Path(name).unlink()
        break
print(fakelib.status(n, "IN_PROGRESS", files=1, summary="refactored"))
