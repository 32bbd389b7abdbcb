#!/usr/bin/env python3
"""A scripted agent for the eval's tests (issue #43): it applies the patch its script holds
for the task in its prompt, and claims the work done either way.

--patches DIR: DIR/NAME.patch is the work for a task whose prompt names NAME (the eval's MP
title is the task's instance id), as a whole word; the longest name found wins. No patch for the task: it
changes nothing and still claims completion (the scripted "does not solve it")."""

import re
import subprocess
import sys
from pathlib import Path

import fakelib

opts = fakelib.options([("--patches", {"required": True})])
text = fakelib.prompt(opts)
fakelib.start(opts, text)
n = fakelib.nonce(text)
names = sorted((p.stem for p in Path(opts.patches).glob("*.patch")), key=len, reverse=True)
name = next((s for s in names if re.search(rf"(?<![\w.-]){re.escape(s)}(?![\w.-])", text)), None)
if name is not None:
    patch = Path(opts.patches) / f"{name}.patch"
    done = subprocess.run(["git", "apply", "--whitespace=nowarn", str(patch)], capture_output=True, text=True)
    if done.returncode != 0:
        print(f"the patch for {name} did not apply: {done.stderr}", file=sys.stderr)
    print(f"I applied the work for {name}.")
else:
    print("I looked, and I believe it is done.")
print(fakelib.complete(n))
print(fakelib.status(n, "COMPLETE", files=1 if name else 0, summary="applied the patch" if name else "nothing to do"))
