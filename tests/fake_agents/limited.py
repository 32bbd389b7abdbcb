#!/usr/bin/env python3
"""A fake agent whose provider refuses the first --times calls: with a usage-limit notice
(Claude Code's `usage limit reached|<epoch>` form, --reset seconds ahead), an outage, or
an auth error (--kind). Later calls behave like good.py."""

import sys
import time
from pathlib import Path

import fakelib

opts = fakelib.options(
    [
        ("--kind", {"choices": ["usage", "outage", "auth"], "required": True}),
        ("--count", {"required": True}),
        ("--times", {"type": int, "default": 1}),
        ("--reset", {"type": float, "default": 2.0}),
    ]
)
text = fakelib.prompt(opts)
fakelib.start(opts, text)
counter = Path(opts.count)
calls = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(calls + 1))
if calls < opts.times:
    if opts.kind == "usage":
        print(f"Claude AI usage limit reached|{int(time.time() + opts.reset)}", file=sys.stderr)
    elif opts.kind == "outage":
        print('API Error: 529 {"type":"error","error":{"type":"overloaded_error"}}', file=sys.stderr)
    else:
        print("Invalid API key · Please run /login", file=sys.stderr)
    sys.exit(1)
n = fakelib.nonce(text)
files = fakelib.do_writes(text)
print(fakelib.complete(n))
print(fakelib.status(n, "COMPLETE", files=files))
