#!/usr/bin/env python3
"""A fake agent that does its micro-task honestly, but first tries what a hostile or
careless agent would (issue #33): each attempt is a JSON line on stdout, `{"attempt",
"ok", "detail"}`, so the evidence shows it.

--read F (repeatable): read a file (a key in ~/.ssh, mp-engine.toml, another run's files)
--write F (repeatable): write a file outside the worktree
--signal PID: send SIGUSR2 to a process (the engine); also a line `Signal pid N.` in the prompt
--linger TOKEN: leave a background process behind, `sleep 300` with TOKEN in its arguments
--connect HOST:PORT (repeatable): open a TCP connection
"""

import json
import os
import re
import signal
import socket
import subprocess

import fakelib


def attempt(name: str, fn) -> None:
    try:
        detail = fn()
        ok = True
    except Exception as e:  # noqa: BLE001 - every failure is the outcome we report
        ok, detail = False, f"{type(e).__name__}: {e}"
    print(json.dumps({"attempt": name, "ok": ok, "detail": str(detail)[:200]}), flush=True)


def read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if not text:
        raise PermissionError("read nothing: the file is empty here")
    return f"read {len(text)} characters"


def write(path: str) -> str:
    with open(path, "w") as f:
        f.write("the agent was here\n")
    return "written"


def connect(spec: str) -> str:
    host, _, port = spec.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=3):
        return "connected"


opts = fakelib.options(
    [
        ("--read", {"action": "append", "default": []}),
        ("--write", {"action": "append", "default": []}),
        ("--signal", {"type": int}),
        ("--linger", {}),
        ("--connect", {"action": "append", "default": []}),
    ]
)
text = fakelib.prompt(opts)
fakelib.start(opts, text)
for path in opts.read:
    attempt(f"read {path}", lambda p=path: read(p))
for path in opts.write:
    attempt(f"write {path}", lambda p=path: write(p))
target = opts.signal or next((int(m) for m in re.findall(r"Signal pid (\d+)\.", text)), None)
if target:
    attempt(f"signal {target}", lambda: os.kill(target, signal.SIGUSR2) or "signalled")
if opts.linger:
    cmd = ["sh", "-c", f"sleep 300 # {opts.linger}"]
    attempt("linger", lambda: f"left pid {subprocess.Popen(cmd, start_new_session=True).pid}")
for spec in opts.connect:
    attempt(f"connect {spec}", lambda s=spec: connect(s))
n = fakelib.nonce(text)
files = fakelib.do_writes(text)
print(f"I wrote {files} file(s).")
print(fakelib.complete(n))
print(fakelib.status(n, "COMPLETE", files=files, summary=f"wrote {files} file(s)"))
