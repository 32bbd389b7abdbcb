#!/usr/bin/env python3
"""A fake agent that gets a micro-task wrong on its first iteration and right from the
second on; from the second iteration it first waits for --gate (printing dots), so a
test can act while it is mid-iteration."""

import os

import fakelib

opts = fakelib.options([("--gate", {"required": True})])
text = fakelib.prompt(opts)
fakelib.start(opts, text)
n = fakelib.nonce(text)
if os.environ.get("MP_ITERATION") == "1":
    fakelib.do_writes(text, lambda s: "WRONG " + s)
    print(fakelib.status(n, "IN_PROGRESS", summary="first attempt"))
    raise SystemExit(0)
fakelib.wait_for(opts.gate)
files = fakelib.do_writes(text)
print(fakelib.complete(n))
print(fakelib.status(n, "COMPLETE", files=files))
