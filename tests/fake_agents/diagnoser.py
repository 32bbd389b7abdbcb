#!/usr/bin/env python3
"""A fake agent asked for a diagnosis (`[diagnose] level`, issue #34): it tries to change
the workspace (the read-only sandbox must refuse), reads the file the failure names,
and answers with the block its prompt asks for, under the prompt's nonce."""

import re
from pathlib import Path

import fakelib

opts = fakelib.options()
text = fakelib.prompt(opts)
fakelib.start(opts, text)
nonce = re.search(r'^<diagnosis nonce="([0-9a-f]+)">', text, re.M).group(1)
try:
    Path("diagnoser-was-here.txt").write_text("x")
    wrote = "WROTE"
except OSError as e:
    wrote = f"REFUSED ({e.strerror})"
seen = Path("config/settings.ini").read_text().strip() if Path("config/settings.ini").exists() else "nothing"
print(f"writing: {wrote}")
print(f'<diagnosis nonce="{nonce}">')
print(f"ROOT CAUSE: the step reads config/settings.ini, which says {seen!r}, but it needs a port.")
print("FIX: add `port = 8080` to config/settings.ini.")
print("</diagnosis>")
