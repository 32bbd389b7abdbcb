#!/usr/bin/env python3
"""A fake agent that works toward a metric goal (issue #34): at its Nth iteration it writes
the Nth of --values to `coverage.txt` (the last one from then on), and a file of its own
each time (a diff that moves nothing when the value stalls). It claims completion."""

import os
from pathlib import Path

import fakelib

opts = fakelib.options([("--values", {"required": True})])
text = fakelib.prompt(opts)
fakelib.start(opts, text)
n = fakelib.nonce(text)
values = opts.values.split(",")
i = int(os.environ.get("MP_ITERATION", "1"))
Path("coverage.txt").write_text(values[min(i, len(values)) - 1] + "\n")
Path(f"notes-{i}.txt").write_text(f"tried {i}\n")
print(fakelib.complete(n))
print(fakelib.status(n, "COMPLETE", files=2, summary=f"coverage now {values[min(i, len(values)) - 1]}"))
