#!/usr/bin/env python3
"""A fake `codex exec --json` whose command sandbox cannot start (issue #34): every
command it runs fails with bwrap's error, as codex 0.169 does on a host where its
codex-linux-sandbox helper is missing. It reports honestly that it made no progress."""

import json

import fakelib

opts = fakelib.options()
text = fakelib.prompt(opts)
fakelib.start(opts, text)
n = fakelib.nonce(text)
failed = "bwrap: execvp codex-linux-sandbox: No such file or directory\n"
events = [
    {"type": "thread.started", "thread_id": "t1"},
    {"type": "turn.started"},
    *(
        {
            "type": "item.completed",
            "item": {
                "id": f"i{k}",
                "type": "command_execution",
                "command": cmd,
                "aggregated_output": failed,
                "exit_code": 1,
                "status": "failed",
            },
        }
        for k, cmd in enumerate(("ls", "cat out/a.txt"))
    ),
    {"type": "item.completed", "item": {"id": "i9", "type": "agent_message", "text": fakelib.status(n, "IN_PROGRESS")}},
    {"type": "turn.completed", "usage": {"input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 5}},
]
for e in events:
    print(json.dumps(e))
