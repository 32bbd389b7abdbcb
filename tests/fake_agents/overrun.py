#!/usr/bin/env python3
"""A fake agent that prints its answer as claude's JSON result (`--output-format json`),
does the work and claims it, and reports `num_turns` past the --max-turns it was given
(claude-code-action #1577: 73 turns under `--max-turns 60`, reported as success) unless
--within: then it reports exactly its limit."""

import json

import fakelib

opts = fakelib.options([("--max-turns", {"type": int, "required": True}), ("--within", {"action": "store_true"})])
text = fakelib.prompt(opts)
fakelib.start(opts, text)
n = fakelib.nonce(text)
files = fakelib.do_writes(text)
answer = fakelib.complete(n) + "\n" + fakelib.status(n, "COMPLETE", files=files)
turns = opts.max_turns if opts.within else opts.max_turns + 13
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "num_turns": turns, "result": answer}))
