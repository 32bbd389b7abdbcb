#!/usr/bin/env python3
"""A fake agent that changes nothing and says it is still working."""

import fakelib

opts = fakelib.options()
text = fakelib.prompt(opts)
fakelib.start(opts, text)
n = fakelib.nonce(text)
print("Looking around the repository...")
print(fakelib.status(n, "IN_PROGRESS", files=0, summary="read some files"))
