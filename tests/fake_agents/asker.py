#!/usr/bin/env python3
"""A fake agent that asks before it works: blocked with a question until its prompt carries
a person's answer (## You asked; a person answered), then it does the task's writes and
names the answer in its summary."""

import re

import fakelib

opts = fakelib.options()
text = fakelib.prompt(opts)
fakelib.start(opts, text)
n = fakelib.nonce(text)
answered = re.search(r"^The answer:\n```text\n(.*?)\n", text, re.M)
if answered is None:
    print(f'<blocked nonce="{n}">Which database should the service use?</blocked>')
    print(fakelib.status(n, "BLOCKED", files=0, summary="which database?"))
else:
    files = fakelib.do_writes(text)
    print(fakelib.complete(n))
    print(fakelib.status(n, "COMPLETE", files=files, summary=f"used {answered.group(1)}"))
