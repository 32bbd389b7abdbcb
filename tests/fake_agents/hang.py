#!/usr/bin/env python3
"""A fake agent that hangs on its first call: it starts a child, prints one line and then
nothing, forever. Later calls behave like good.py. --pids F records the child's pid."""

import subprocess
import time
from pathlib import Path

import fakelib

opts = fakelib.options([("--flag", {"required": True}), ("--pids", {"required": True})])
text = fakelib.prompt(opts)
fakelib.start(opts, text)
n = fakelib.nonce(text)
if not Path(opts.flag).exists():
    Path(opts.flag).touch()
    child = subprocess.Popen(["sleep", "300"])
    Path(opts.pids).write_text(str(child.pid))
    print("thinking...", flush=True)
    while True:
        time.sleep(1)
files = fakelib.do_writes(text)
print(fakelib.complete(n))
print(fakelib.status(n, "COMPLETE", files=files))
