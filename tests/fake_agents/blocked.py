#!/usr/bin/env python3
"""A fake agent that cannot go on and says so, with the nonce."""

import fakelib

opts = fakelib.options()
text = fakelib.prompt(opts)
fakelib.start(opts, text)
n = fakelib.nonce(text)
print(f'<blocked nonce="{n}">I need the database password, which is not in the repository</blocked>')
print(fakelib.status(n, "BLOCKED", files=0, summary="need the database password"))
