#!/usr/bin/env python3
"""The soak's fake agent (issue #45): one level that behaves as each micro-task's text asks,
so one `[agent]` chain serves every kind of agent MP the soak sends. Beside fakelib's
`Write "TEXT" to `PATH`.` it understands, on the task's lines:

    Ask a person first.        blocked with a question until the prompt carries an answer
    Hit the usage limit first. the first call of this task (this run) meets a usage limit
    Wait to be cancelled.      print progress until killed (at most --hang seconds)

--state DIR keeps which tasks met their limit; --log F gets one JSON line per call
(`run`, `mt`, `iteration`, `pid`, `t0`, `limited`), read by the soak's checker.
"""

import json
import os
import sys
import time
from pathlib import Path

import fakelib

opts = fakelib.options([("--state", {"required": True}), ("--hang", {"type": float, "default": 120.0})])
text = fakelib.prompt(opts)
task = fakelib.task(text)
run_dir = os.environ.get("MP_RUN_DIR", "")
mt = os.environ.get("MP_MT", "")
limited = False
if "Hit the usage limit first." in task:
    mark = Path(opts.state) / f"{Path(run_dir).name}.{mt}.limited"
    limited = not mark.exists()
    if limited:
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.touch()
if opts.log:  # before anything else: a kill at any later moment still leaves the line
    entry = {"run": Path(run_dir).name, "mt": mt, "iteration": int(os.environ.get("MP_ITERATION", "0"))}
    entry.update({"pid": os.getpid(), "t0": time.time(), "limited": limited})
    with open(opts.log, "a") as f:
        f.write(json.dumps(entry) + "\n")
n = fakelib.nonce(text)
if limited:
    print(f"Claude AI usage limit reached|{int(time.time() + 2)}", file=sys.stderr)
    sys.exit(1)
if opts.sleep:
    fakelib.think(opts.sleep)
if "Wait to be cancelled." in task:
    fakelib.think(opts.hang)
    print(fakelib.status(n, "IN_PROGRESS", files=0, summary="nobody cancelled me"))
    sys.exit(0)
if "Ask a person first." in task and "## You asked; a person answered" not in text:
    print(f'<blocked nonce="{n}">Which colour should the soak use?</blocked>')
    print(fakelib.status(n, "BLOCKED", files=0, summary="which colour?"))
    sys.exit(0)
files = fakelib.do_writes(text)
print(fakelib.complete(n))
print(fakelib.status(n, "COMPLETE", files=files, summary=f"wrote {files} file(s)"))
