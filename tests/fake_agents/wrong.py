#!/usr/bin/env python3
"""A fake agent that always gets it wrong (a different wrong answer each time, so it
looks busy), reports IN_PROGRESS honestly, and never claims completion... unless
--claim is given."""

import os

import fakelib

opts = fakelib.options([("--claim", {"action": "store_true"})])
text = fakelib.prompt(opts)
fakelib.start(opts, text)
n = fakelib.nonce(text)
stamp = f"{os.environ.get('MP_LEVEL')}-{os.environ.get('MP_ITERATION')}"
files = fakelib.do_writes(text, lambda s: f"WRONG {stamp} {s[::-1]}")
if opts.claim:
    print(fakelib.complete(n))
print(fakelib.status(n, "COMPLETE" if opts.claim else "IN_PROGRESS", files=files, summary="tried something"))
