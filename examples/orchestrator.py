"""A worked orchestrator: drive two MPs through `mp-engine mcp` with the MCP Python SDK's
client, as an LLM's tool calls would (docs/ORCHESTRATORS.md).

    .venv/bin/pip install -e '.[mcp]'      # in a clone of mp-engine (it is not on PyPI)
    .venv/bin/python examples/orchestrator.py --repo git@github.com:me/mp-channel.git

It sends MP-<n>.1, which fails on purpose, reads the diagnosis, sends the corrected
MP-<n>.2 with `approve` (which lifts the halt), waits for it, and prints a short report.
Exit 0 when the corrected MP completed.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {result.content}")
    return result.structured_content


async def wait(client: Client, mp_id: str, timeout: float) -> dict[str, Any]:
    """Call wait_result until the MP is done (each call holds at most 25 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = await call(client, "wait_result", mp=mp_id, max_wait_s=25)
        if got["done"]:
            return got
        print(f"  {mp_id}: {got.get('progress') or got.get('status')}", file=sys.stderr)
    raise TimeoutError(f"no result for {mp_id} within {timeout:g} s")


def server(repo: str) -> StdioServerParameters:
    """`mp-engine mcp --repo REPO`: the command on PATH, else the one beside this Python
    (a venv that is not activated), else this Python's module."""
    here = str(Path(sys.executable).parent)
    command = shutil.which("mp-engine") or shutil.which("mp-engine", path=here)
    if command is not None:
        return StdioServerParameters(command=command, args=["mcp", "--repo", repo])
    if importlib.util.find_spec("mp_engine") is None:
        raise SystemExit(
            "mp-engine is not installed for this Python: run the example with the venv's Python "
            "(.venv/bin/python examples/orchestrator.py ...), or install it into this one: `pip install -e '.[mcp]'` "
            "in a clone of mp-engine"
        )
    return StdioServerParameters(command=sys.executable, args=["-m", "mp_engine", "mcp", "--repo", repo])


async def main(repo: str, series: int, timeout: float) -> int:
    params = server(repo)
    # The server's log lines (JSON off a terminal) go to a file, not between the report's
    # lines; it is kept, and named, when something went wrong.
    fd, log = tempfile.mkstemp(prefix="mp-engine-mcp-", suffix=".log")
    code = 1
    try:
        with os.fdopen(fd, "w") as errlog:
            code = await drive(Client(stdio_client(params, errlog=errlog)), series, timeout)
    finally:
        if code == 0:
            os.unlink(log)
        else:
            print(f"the MCP server's log: {log}", file=sys.stderr)
    return code


async def drive(client: Client, series: int, timeout: float) -> int:
    first, second = f"MP-{series}.1", f"MP-{series}.2"
    async with client:
        status = await call(client, "get_status")
        print(f"engine: {status['engine']['engine']}, state {status['state'].get('status')}")
        if status["state"].get("halt"):
            print(f"the engine is halted: {status['lift_halt_with']}; approve or fix that first")
            return 1

        failing = f"# {first} Count the files\n\n```bash\ntest -f does-not-exist.txt\n```\n"
        sent = await call(client, "send_mp", text=failing)
        if not sent.get("sent") and not sent.get("already"):
            print(f"not sent: {json.dumps(sent)}")
            return 1
        result = (await wait(client, first, timeout))["result"]
        print(f"{first}: {result['status']}; diagnosis: {(result.get('diagnosis') or {}).get('summary')}")
        print(f"  fix: {result.get('fix')}")

        # A model would write the correction from the diagnosis; this one creates the file.
        fixed = (
            f"# {second} Count the files, after creating one\n\n```bash\ntouch does-not-exist.txt\nls | wc -l\n```\n"
        )
        if result["status"] == "ERROR":
            sent = await call(client, "approve", mp_id=first, text=fixed)
        else:
            sent = await call(client, "send_mp", text=fixed)
        print(f"{second}: sent={sent.get('sent')} {sent.get('refused') or ''}".rstrip())
        done = await wait(client, second, timeout)
        steps = done["result"]["steps"]
        print(f"{second}: {done['status']}; step output: {steps[0]['stdout_tail'].strip() if steps else '-'}")
        listed = await call(client, "list_results", limit=2)
        print("latest results: " + ", ".join(f"{r['mp_id']} {r['status']}" for r in listed["results"]))
        return 0 if done["status"] == "COMPLETED" else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", required=True, help="the engine's git remote (URL or path)")
    parser.add_argument("--series", type=int, default=int(time.time()) % 100000, help="the MP major number to use")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for each result")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.repo, args.series, args.timeout)))
