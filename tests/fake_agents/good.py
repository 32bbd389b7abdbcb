#!/usr/bin/env python3
"""A fake agent that does what the micro-task says and claims it, honestly.
--commit: commit its changes itself (`git add -A && git commit`), as some agents do.
--echo-prompt: first print the whole prompt on stderr, as `codex exec` does.
--obey-review: also carry out the instructions of the reviewer's requested changes (issue #42)."""

import subprocess
import sys

import fakelib

opts = fakelib.options(
    [
        ("--commit", {"action": "store_true"}),
        ("--echo-prompt", {"action": "store_true"}),
        ("--obey-review", {"action": "store_true"}),
    ]
)
text = fakelib.prompt(opts)
if opts.echo_prompt:
    sys.stderr.write(f"user\n{text}\n")
fakelib.start(opts, text)
n = fakelib.nonce(text)
files = fakelib.do_writes(text)
if opts.obey_review:
    files += fakelib.do_writes(text, section="The check `review` failed")
if opts.commit:
    for path in [p for _c, p in fakelib.writes(text)]:
        subprocess.run(["git", "add", "--", path], check=True)
    subprocess.run(["git", "commit", "-q", "-m", "agent: did the micro-task"], check=True)
print(f"I wrote {files} file(s).")
print(fakelib.complete(n))
print(fakelib.status(n, "COMPLETE", files=files, summary=f"wrote {files} file(s)"))
