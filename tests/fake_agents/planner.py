#!/usr/bin/env python3
"""A fake planner level: its n-th call answers with the plan in `--answers DIR/<n>.json`
(the last one again when there are fewer), as a <plan> block with the run's nonce, and
keeps the prompt it got as DIR/prompt-<n>.md. A file holding text that is not JSON is
printed as it is (a broken answer)."""

from pathlib import Path

import fakelib

opts = fakelib.options([("--answers", {"required": True})])
text = fakelib.prompt(opts)
fakelib.start(opts, text)
folder = Path(opts.answers)
counter = folder / ".calls"
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
(folder / f"prompt-{n}.md").write_text(text)
answers = sorted(folder.glob("*.json"), key=lambda p: int(p.stem))
answer = next((p for p in answers if int(p.stem) == n), answers[-1])
print("Here is the plan.")
print(f'<plan nonce="{fakelib.nonce(text)}">\n{answer.read_text()}\n</plan>')
