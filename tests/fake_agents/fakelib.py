"""What the fake agent CLIs share: read the prompt like a real agent (a file, an argument
or stdin), find the run's nonce and the current micro-task, carry out its instructions,
and print claims. Instructions they understand, one per line of the micro-task:

    Write "TEXT" to `PATH`.
    Append "TEXT" to `PATH`.      (a line at its end)

Options every fake agent takes: --prompt-file F | --prompt TEXT (else stdin), --log F
(append one JSON line per call), --wait-for F (block, printing dots, until F exists),
--touch F (create F while working), --sleep S (take S seconds, as a model does).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

WRITE_RE = re.compile(r'[Ww]rite "([^"]*)" to `([^`]+)`')
APPEND_RE = re.compile(r'[Aa]ppend "([^"]*)" to `([^`]+)`')


def options(extra: list[tuple[str, dict]] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--prompt-file")
    p.add_argument("--prompt")
    p.add_argument("--log")
    p.add_argument("--wait-for")
    p.add_argument("--touch")
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--cost", type=float, help="print aider's token and cost line for one message of this cost")
    p.add_argument("--tokens", type=int, help="print aider's token line (this many sent, 30 received), no cost")
    for name, kw in extra or []:
        p.add_argument(name, **kw)
    return p.parse_args()


def prompt(opts: argparse.Namespace) -> str:
    if opts.prompt_file:
        return Path(opts.prompt_file).read_text()
    if opts.prompt is not None:
        return opts.prompt
    return sys.stdin.read()


def nonce(text: str) -> str | None:
    """The run's nonce: the status block's NONCE line (a worker's prompt), or the nonce of
    the answer block a planner's or reflector's prompt shows."""
    m = re.search(r"^NONCE: (\S+)", text, re.M) or re.search(r'^<\w+ nonce="([^"]+)">', text, re.M)
    return m.group(1) if m else None


def task(text: str, section: str = "Your micro-task now") -> str:
    m = re.search(rf"^## {re.escape(section)}.*?\n(.*?)^## ", text, re.M | re.S)
    return m.group(1) if m else ""


def writes(text: str, section: str = "Your micro-task now") -> list[tuple[str, str]]:
    return WRITE_RE.findall(task(text, section))


def do_writes(text: str, transform=lambda s: s, section: str = "Your micro-task now") -> int:
    done = 0
    for content, path in writes(text, section):
        target = Path.cwd() / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(transform(content) + "\n")
        done += 1
    for content, path in APPEND_RE.findall(task(text, section)):
        target = Path.cwd() / path
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a") as f:
            f.write(transform(content) + "\n")
        done += 1
    return done


def status(
    n: str | None, state: str = "COMPLETE", *, work: str = "code", files: int = 1, summary: str = "did it"
) -> str:
    exit_signal = "true" if state == "COMPLETE" else "false"
    nonce_line = f"NONCE: {n}\n" if n is not None else ""
    return (
        f"---LOOPR_STATUS---\n{nonce_line}STATUS: {state}\nEXIT_SIGNAL: {exit_signal}\nWORK_TYPE: {work}\n"
        f"FILES_MODIFIED: {files}\nERRORS: 0\nSUMMARY: {summary}\n---END_LOOPR_STATUS---"
    )


def complete(n: str | None) -> str:
    return f'<mt_complete nonce="{n}">every check: see the files I wrote</mt_complete>'


def start(opts: argparse.Namespace, text: str) -> None:
    """Log the call, honour --touch and --wait-for."""
    if opts.log:
        entry = {
            "mt": os.environ.get("MP_MT"),
            "iteration": int(os.environ.get("MP_ITERATION", "0")),
            "level": int(os.environ.get("MP_LEVEL", "0")),
            "pid": os.getpid(),
            "nonce_seen": nonce(text) is not None,
            "cwd": os.getcwd(),
            "t0": time.time(),
        }
        with open(opts.log, "a") as f:
            f.write(json.dumps(entry) + "\n")
    if opts.touch:
        Path(opts.touch).touch()
    if opts.wait_for:
        wait_for(opts.wait_for)
        print()
    if opts.sleep:
        think(opts.sleep)
    if opts.cost is not None:  # as aider prints it after each message (base_coder.py)
        print(f"Tokens: 1.2k sent, 30 received. Cost: ${opts.cost:.2f} message, ${opts.cost:.2f} session.")
    if opts.tokens is not None:  # a CLI that counts tokens and says nothing of dollars
        print(f"Tokens: {opts.tokens} sent, 30 received.")


def think(seconds: float) -> None:
    """Take `seconds`, as a model does, printing progress meanwhile (so the idle timeout
    does not fire). Sleeping is the point here: it stands for the model's time."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        print(".", end="", flush=True)
        time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))
    print()


def wait_for(path: str) -> None:
    """Work until `path` exists, as a busy agent does: printing progress (so the idle
    timeout does not fire) while a test acts mid-call. Polling is the point here."""
    while not Path(path).exists():
        print(".", end="", flush=True)
        time.sleep(0.05)
