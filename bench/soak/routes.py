"""The orchestrator's three ways to the engine, as an orchestrator uses them: the client's
calls in this process (`client/orchestrate.py`, the bodies of the MCP tools), the MCP tools
through the SDK's client over stdio (`mp-engine mcp`, one session for the run), and
`mp-engine send` as a subprocess. Each answers with the same small dict:

    {"sent": bool, "already": str | None, "retry": bool, "said": str}

`retry` is true when nothing was sent but trying later may (the remote is away, the engine
is halted on something else); `already` when these bytes wait or ran (nothing sent).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Any


def answer_of(got: dict[str, Any]) -> dict[str, Any]:
    """An orchestrate/MCP answer in the routes' form."""
    said = str(got.get("note") or got.get("refused") or got.get("error") or got.get("reason") or "")
    if got.get("sent"):
        return {"sent": True, "already": None, "retry": False, "said": said}
    if got.get("already"):
        return {"sent": False, "already": str(got["already"]), "retry": False, "said": said}
    return {"sent": False, "already": None, "retry": got.get("valid") is not False, "said": said}


class InProcess:
    """`Orchestrator` from mp_engine.client, called here (its own working clone)."""

    name = "orch"

    def __init__(self, url: str):
        from mp_engine.client.orchestrate import Orchestrator

        self.o = Orchestrator(url, poll=0.25)

    def send(self, text: str) -> dict[str, Any]:
        return answer_of(self.o.send_mp(text))

    def approve(self, mp_id: str, text: str) -> dict[str, Any]:
        return answer_of(self.o.send_mp(text, approves=mp_id))

    def answer(self, mp_id: str, text: str) -> dict[str, Any]:
        return answer_of(self.o.answer(mp_id, text))

    def cancel(self, mp_id: str) -> dict[str, Any]:
        return answer_of(self.o.cancel(mp_id))

    def close(self) -> None:
        pass


class Mcp:
    """`mp-engine mcp --repo URL` over stdio, driven by the MCP SDK's `Client` in a thread
    of its own (an anyio portal), one session for the whole run."""

    name = "mcp"

    def __init__(self, url: str, env: dict[str, str], log: Path):
        from anyio.from_thread import start_blocking_portal
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters

        # The server's own log (a line per tool call) goes to a file, not the soak's output.
        script = 'exec "$0" -m mp_engine mcp --repo "$1" 2>>"$2"'
        params = StdioServerParameters(command="/bin/sh", args=["-c", script, sys.executable, url, str(log)], env=env)
        self._stack = contextlib.ExitStack()
        self.portal = self._stack.enter_context(start_blocking_portal())
        self.client = self._stack.enter_context(self.portal.wrap_async_context_manager(Client(params)))

    def call(self, tool: str, **args: Any) -> dict[str, Any]:
        result = self.portal.call(self.client.call_tool, tool, args)
        return dict(result.structured_content or {})

    def send(self, text: str) -> dict[str, Any]:
        return answer_of(self.call("send_mp", text=text))

    def approve(self, mp_id: str, text: str) -> dict[str, Any]:
        return answer_of(self.call("approve", mp_id=mp_id, text=text))

    def answer(self, mp_id: str, text: str) -> dict[str, Any]:
        return answer_of(self.call("answer", mp_id=mp_id, text=text))

    def cancel(self, mp_id: str) -> dict[str, Any]:
        return answer_of(self.call("cancel", mp_id=mp_id))

    def close(self) -> None:
        self._stack.close()


class Cli:
    """`mp-engine send` as a subprocess: FILE, `--answer MP-ID FILE`, `--cancel MP-ID`."""

    name = "cli"

    def __init__(self, url: str, env: dict[str, str], scratch: Path):
        self.url, self.env, self.scratch = url, env, scratch
        scratch.mkdir(parents=True, exist_ok=True)

    def _run(self, *args: str) -> dict[str, Any]:
        argv = [sys.executable, "-m", "mp_engine", "send", *args, "--repo", self.url]
        proc = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=300)
        said = (proc.stdout + proc.stderr).strip()
        if proc.returncode == 0 and "nothing sent" in said:
            return {
                "sent": False,
                "already": "ran" if "already ran" in said else "waiting",
                "retry": False,
                "said": said,
            }
        if proc.returncode == 0:
            return {"sent": True, "already": None, "retry": False, "said": said}
        return {"sent": False, "already": None, "retry": proc.returncode in (6, 8), "said": said}

    def _file(self, name: str, text: str) -> str:
        path = self.scratch / name
        path.write_text(text)
        return str(path)

    def send(self, text: str) -> dict[str, Any]:
        return self._run(self._file("mp.md", text))

    def approve(self, mp_id: str, text: str) -> dict[str, Any]:
        from mp_engine.client.orchestrate import with_approval

        return self.send(with_approval(text, mp_id))

    def answer(self, mp_id: str, text: str) -> dict[str, Any]:
        return self._run("--answer", mp_id, self._file("answer.txt", text))

    def cancel(self, mp_id: str) -> dict[str, Any]:
        return self._run("--cancel", mp_id)

    def close(self) -> None:
        pass
