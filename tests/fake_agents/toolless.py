#!/usr/bin/env python3
"""A fake agent without tools of its own (an `ollama run` model): it never opens a file of
the workspace. It answers from what the prompt shows: the value of SECRET_NUMBER in the
compiled context's file contents, plus one, written to the file the task names (through the
one write the engine's fakes share, standing in for a human applying its answer)."""

import re
from pathlib import Path

import fakelib

opts = fakelib.options()
text = fakelib.prompt(opts)
fakelib.start(opts, text)
m = re.search(r"^SECRET_NUMBER = (\d+)$", text, re.M)
target = re.search(r"to `([^`]+)`", fakelib.task(text))
if m and target:
    out = Path.cwd() / target.group(1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"{int(m.group(1)) + 1}\n")
    print(fakelib.complete(fakelib.nonce(text)))
    print(fakelib.status(fakelib.nonce(text)))
else:
    print("I cannot see SECRET_NUMBER in what I was given.")
    print(fakelib.status(fakelib.nonce(text), "IN_PROGRESS", files=0, summary="no context"))
