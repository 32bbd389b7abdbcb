#!/usr/bin/env python3
"""A fake agent that does nothing and claims completion, with the right nonce."""

import fakelib

opts = fakelib.options()
text = fakelib.prompt(opts)
fakelib.start(opts, text)
n = fakelib.nonce(text)
print("All done, trust me.")
print(fakelib.complete(n))
print(fakelib.status(n, "COMPLETE", files=0, summary="everything is done"))
