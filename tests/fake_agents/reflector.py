#!/usr/bin/env python3
"""A fake reflector level: its n-th call gives the n-th of `--verdicts aligned,drifted,...`
(the last one again after that) with the run's nonce, and keeps the prompt it got as
`--save DIR`/reflect-<n>.md."""

from pathlib import Path

import fakelib

opts = fakelib.options([("--verdicts", {"required": True}), ("--save", {"required": True})])
text = fakelib.prompt(opts)
fakelib.start(opts, text)
folder = Path(opts.save)
folder.mkdir(parents=True, exist_ok=True)
n = len(list(folder.glob("reflect-*.md"))) + 1
(folder / f"reflect-{n}.md").write_text(text)
verdicts = opts.verdicts.split(",")
verdict = verdicts[min(n, len(verdicts)) - 1]
print(f'<{verdict} nonce="{fakelib.nonce(text)}">the reflector\'s reason {n}</{verdict}>')
