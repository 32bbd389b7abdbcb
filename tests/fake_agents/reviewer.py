#!/usr/bin/env python3
"""A fake reviewer level (`[agent.reviewer]`, issue #42): its n-th call answers with the body
in `--answers DIR/<n>.txt` (the last one again after that) inside a <review> block under
the nonce its prompt shows, keeps the prompt as DIR/prompt-<n>.md, and first tries to
change the repository (the read-only sandbox must refuse), saying what happened."""

from pathlib import Path

import fakelib

opts = fakelib.options([("--answers", {"required": True})])
text = fakelib.prompt(opts)
fakelib.start(opts, text)
folder = Path(opts.answers)
n = len(list(folder.glob("prompt-*.md"))) + 1
try:
    (folder / f"prompt-{n}.md").write_text(text)
except OSError:
    pass
try:
    Path("reviewer-was-here.txt").write_text("x")
    print("writing: WROTE")
except OSError as e:
    print(f"writing: REFUSED ({e.strerror})")
answers = sorted(folder.glob("*.txt"), key=lambda p: int(p.stem))
answer = next((p for p in answers if int(p.stem) == n), answers[-1])
print(f'<review nonce="{fakelib.nonce(text)}">\n{answer.read_text().strip()}\n</review>')
