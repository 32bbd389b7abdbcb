#!/usr/bin/env python3
"""A fake agent that does the work, then prints a file that holds a finished status block
and a completion tag without this run's nonce (as `cat NOTES.md` would)."""

from pathlib import Path

import fakelib

opts = fakelib.options([("--echo", {"required": True})])
text = fakelib.prompt(opts)
fakelib.start(opts, text)
fakelib.do_writes(text)
print(Path(opts.echo).read_text())
