"""End to end: an LLM orchestrator's MCP client (the official SDK's `Client`) against
`mp-engine mcp` as a real subprocess, over stdio and over streamable HTTP, with the real
daemon on the other side of a bare remote (issue #18)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import wait_for
from tests.e2e.cli import MP_ENGINE

pytest.importorskip("mcp")
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

pytestmark = pytest.mark.daemon

TOOLS = {"send_mp", "wait_result", "get_status", "list_results", "get_run_file", "approve", "cancel", "answer"}


def mp(mp_id: str, body: str) -> str:
    return f"# {mp_id} From a model\n\n```bash\n{body}\n```\n"


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    return result.structured_content


async def refused(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    """A call that fails: MCP's isError, with the same structured answer (issue #31)."""
    result = await client.call_tool(tool, args)
    assert result.is_error, result.structured_content
    return result.structured_content


async def until_done(client: Client, ref: str) -> dict[str, Any]:
    for _ in range(40):
        got = await call(client, "wait_result", mp=ref, max_wait_s=5)
        if got["done"]:
            return got
    raise AssertionError(f"no result for {ref}")


def env(tmp_path: Path) -> dict[str, str]:
    # The server's working clone lives in its own cache, as on an orchestrator's machine.
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "orchestrator-cache")}


def test_a_model_drives_the_engine_over_stdio(engine, tmp_path):
    bare, url, ws, d = engine

    async def main() -> None:
        params = StdioServerParameters(command=MP_ENGINE, args=["mcp", "--repo", url], env=env(tmp_path))
        async with Client(params) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == TOOLS
            # The server tells the model how to write MPs, agent MPs and plans included.
            assert "`Executor: agent`" in client.instructions and "`Plan: auto`" in client.instructions
            assert tools["get_status"].annotations.read_only_hint is True
            assert tools["approve"].annotations.destructive_hint and tools["cancel"].annotations.destructive_hint
            # Every parameter is described; send_mp's text carries the grammar in short.
            for tool in tools.values():
                for name, prop in tool.input_schema.get("properties", {}).items():
                    assert len(prop.get("description", "")) > 15, (tool.name, name)
            assert "```bash" in tools["send_mp"].input_schema["properties"]["text"]["description"]

            sent = await call(client, "send_mp", text=mp("MP-50.1", "echo hello from the model"))
            assert sent["sent"] and sent["mp_id"] == "MP-50.1" and len(sent["sha256"]) == 64
            again = await call(client, "send_mp", text=mp("MP-50.1", "echo hello from the model"))
            assert not again["sent"] and again["already"]  # idempotent on the SHA-256
            done = await until_done(client, sent["sha256"])
            assert done["status"] == "COMPLETED" and done["result"]["schema"] == "mp-engine/result/1"
            run_id = done["result"]["run_id"]
            out = await call(client, "get_run_file", run_id=run_id, path="steps/step-001.stdout")
            assert out["text"] == "hello from the model\n"
            escape = await refused(client, "get_run_file", run_id=run_id, path="../../mp-engine.toml")
            assert "not a path inside" in escape["error"]

            invalid = await refused(client, "send_mp", text="# MP-50.2 No steps\n\nJust prose.\n")
            assert (
                invalid
                == {
                    "sent": False,
                    "valid": False,
                    "reason": invalid["reason"],
                    "fix": invalid["fix"],
                    "line": None,
                }
                and "nothing to execute" in invalid["reason"]
            )

            failing = await call(client, "send_mp", text=mp("MP-50.3", "exit 3"))
            failed = await until_done(client, "MP-50.3")
            assert failed["status"] == "ERROR" and failed["result"]["fix"] and failed["result"]["approve_with"]
            status = await call(client, "get_status")
            assert status["state"]["halt"]["mp_id"] == "MP-50.3" and "Approves: MP-50.3" in status["lift_halt_with"]
            halted = await refused(client, "send_mp", text=mp("MP-50.4", "true"))
            assert not halted["sent"] and "halted on MP-50.3" in halted["refused"]
            assert "--force" not in halted["refused"] and "Approves: MP-50.3" in halted["refused"]
            approved = await call(client, "approve", mp_id="MP-50.3", text=mp("MP-50.4", "echo fixed"))
            assert approved["sent"], approved
            assert (await until_done(client, "MP-50.4"))["status"] == "COMPLETED"
            listed = await call(client, "list_results", limit=10)
            assert [r["mp_id"] for r in listed["results"]] == ["MP-50.4", "MP-50.3", "MP-50.1"]
            assert failing["sha256"] == listed["results"][1]["mp_sha256"]

    anyio.run(main)
    assert ws.inbox_file.exists() is False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_streamable_http_needs_the_token_and_then_serves_the_same_tools(engine, tmp_path):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    bare, url, ws, d = engine
    port = free_port()
    log = open(tmp_path / "mcp.log", "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [MP_ENGINE, "mcp", "--repo", url, "--http", f"127.0.0.1:{port}", "--token", "s3cret-token-value"],
        env=env(tmp_path),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}/mcp"
    try:

        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        wait_for(listening, timeout=60, what="the MCP server to listen")
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        headers = {"Accept": "application/json, text/event-stream"}
        assert httpx2.post(endpoint, json=init, headers=headers).status_code == 401
        wrong = httpx2.post(endpoint, json=init, headers={**headers, "Authorization": "Bearer nope"})
        assert wrong.status_code == 401

        async def main() -> None:
            auth = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret-token-value"}, timeout=60)
            async with Client(streamable_http_client(endpoint, http_client=auth)) as client:
                assert {t.name for t in (await client.list_tools()).tools} == TOOLS
                sent = await call(client, "send_mp", text=mp("MP-51.1", "echo over http"))
                assert (await until_done(client, "MP-51.1"))["status"] == "COMPLETED", sent
                status = await call(client, "get_status")
                assert status["engine"]["engine"] in ("up", "unknown") and status["state"]["status"] == "ONLINE"

        anyio.run(main)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    calls = (tmp_path / "mcp.log").read_text()
    assert '"tool": "send_mp"' in calls and "<" in calls and "echo over http" not in calls  # MP text not logged


def test_a_non_loopback_address_without_a_token_is_refused(tmp_path):
    r = subprocess.run(
        [MP_ENGINE, "mcp", "--repo", str(tmp_path), "--http", "0.0.0.0:8765"],
        capture_output=True,
        text=True,
        env={k: v for k, v in env(tmp_path).items() if k != "MP_ENGINE_MCP_TOKEN"},
        timeout=60,
    )
    assert r.returncode == 2 and "without a token" in r.stderr and "MP_ENGINE_MCP_TOKEN" in r.stderr


def test_wait_result_says_which_step_a_running_mp_is_on(tmp_path, daemon_factory):
    from tests.conftest import read_state
    from tests.e2e.conftest import GIT_ENV
    from tests.gitutil import engine_workspace, make_remote

    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url, heartbeat_interval=0.3)
    d = daemon_factory(ws.root, env=GIT_ENV).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="engine ONLINE")
    flag = tmp_path / "go"
    text = f"# MP-52.1 Slow\n\n```bash\ntrue\n```\n\n```bash\nwhile [ ! -e {flag} ]; do sleep 0.05; done\n```\n"

    async def main() -> None:
        params = StdioServerParameters(command=MP_ENGINE, args=["mcp", "--repo", url], env=env(tmp_path))
        async with Client(params) as client:
            await call(client, "send_mp", text=text)
            for _ in range(60):
                got = await call(client, "wait_result", mp="MP-52.1", max_wait_s=1)
                if got.get("step", {}).get("id") == "step-002":
                    break
            assert got["done"] is False and got["status"] == "RUNNING", got
            assert got["step"] == {**got["step"], "id": "step-002", "number": 2, "of": 2} and got["run_id"]
            flag.touch()
            assert (await until_done(client, "MP-52.1"))["status"] == "COMPLETED"

    anyio.run(main)
    d.signal(15)
    d.wait()


def test_the_worked_example_orchestrator_drives_a_failure_and_its_fix(engine, tmp_path):
    import shutil
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    bare, url, ws, d = engine
    # issue #44: a newcomer runs it without the venv on PATH ("FileNotFoundError: 'mp-engine'").
    venv = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != venv)
    assert shutil.which("mp-engine", path=path) is None
    r = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "examples" / "orchestrator.py"),
            "--repo",
            url,
            "--series",
            "53",
            "--timeout",
            "60",
        ],
        capture_output=True,
        text=True,
        env={**env(tmp_path), "PATH": path},
        timeout=180,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "MP-53.1: ERROR" in r.stdout and "MP-53.2: sent=True" in r.stdout and "MP-53.2: COMPLETED" in r.stdout
    assert "latest results: MP-53.2 COMPLETED, MP-53.1 ERROR" in r.stdout
    # Its own lines only: the server's JSON log lines went to a file, removed after a success.
    assert all(line.startswith("  MP-53.") for line in r.stderr.splitlines()), r.stderr


def test_get_status_tells_what_the_remote_cannot_show_a_refused_push(tmp_path, daemon_factory):
    """The remote refuses the result commit (a hook, as GitHub refuses files over 100 MB):
    the channel branch cannot say so, the heartbeat does, and get_status reports it."""
    from tests.conftest import read_state
    from tests.e2e.conftest import GIT_ENV
    from tests.gitutil import engine_workspace, make_remote
    from tests.unit.sync.test_size_cap import LIMIT_HOOK

    bare = make_remote(tmp_path)
    (bare / "hooks" / "pre-receive").write_text(LIMIT_HOOK)
    (bare / "hooks" / "pre-receive").chmod(0o755)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url, max_file_bytes=0, heartbeat_interval=0.3)
    d = daemon_factory(ws.root, env=GIT_ENV).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="engine ONLINE")

    async def main() -> dict[str, Any]:
        params = StdioServerParameters(command=MP_ENGINE, args=["mcp", "--repo", url], env=env(tmp_path))
        async with Client(params) as client:
            await call(client, "send_mp", text=mp("MP-54.1", "head -c 2000000 /dev/zero | tr '\\0' x"))
            # Each get_status is a fetch; ask again until a heartbeat carries the refusal.
            deadline = anyio.current_time() + 30
            while anyio.current_time() < deadline:
                status = await call(client, "get_status")
                if status.get("not_on_the_remote", {}).get("blocked"):
                    return status
            raise AssertionError(f"get_status never reported the refused push within 30 s: {status}")

    status = anyio.run(main)
    held = status["not_on_the_remote"]
    assert held["blocked"]["kind"] == "push_refused" and "over the 1 MiB limit" in held["blocked"]["message"]
    assert held["unpushed"] >= 1
    d.signal(15)
    d.wait()


def test_a_model_answers_an_agent_mp_that_asked_and_waits_for_the_same_runs_result(tmp_path, daemon_factory):
    from tests.agentutil import ONE, configure, level
    from tests.conftest import read_state
    from tests.e2e.conftest import GIT_ENV
    from tests.gitutil import engine_workspace, make_remote

    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url, poll_interval=0.3)
    configure(ws, [level("asker", "asker.py")], land="branch")
    d = daemon_factory(ws.root, env=GIT_ENV).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="engine ONLINE")

    async def main() -> None:
        params = StdioServerParameters(command=MP_ENGINE, args=["mcp", "--repo", url], env=env(tmp_path))
        async with Client(params) as client:
            await call(client, "send_mp", text=ONE)
            asked = await until_done(client, "MP-3.2")
            assert asked["status"] == "ERROR" and "Which database" in str(asked), asked
            sent = await call(client, "answer", mp_id="MP-3.2", text="PostgreSQL 16.")
            assert sent["sent"] is True, sent
            for _ in range(60):
                got = await call(client, "wait_result", mp="MP-3.2", max_wait_s=2)
                if got["done"] and got.get("status") == "COMPLETED":
                    break
            assert got["status"] == "COMPLETED" and got["result"]["run_id"] == asked["result"]["run_id"], got
            again = await refused(client, "answer", mp_id="MP-3.2", text="again")
            assert again["sent"] is False and "waits for no answer" in again["error"]

    anyio.run(main)
    d.signal(15)
    d.wait()


def test_without_the_mcp_extra_it_says_how_to_install_it(tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "mcp.py").write_text("raise ModuleNotFoundError(\"No module named 'mcp'\", name='mcp')\n")
    r = subprocess.run(
        [MP_ENGINE, "mcp", "--repo", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**env(tmp_path), "PYTHONPATH": str(shim)},
        timeout=60,
    )
    assert r.returncode == 2
    assert r.stderr.strip() == "mp-engine mcp: the MCP SDK is not installed: pip install 'mp-engine[mcp]'"


def test_a_model_sees_the_plan_that_waits_in_get_status_and_wait_result_and_approves_it(tmp_path, daemon_factory):
    """issue #42: `Plan: review` from a model; the plan that waits is in wait_result's result
    and in get_status's `question`; `answer approve` starts the same run."""
    from tests.agentutil import PLANNED, configure, level, planner, task
    from tests.conftest import read_state
    from tests.e2e.conftest import GIT_ENV
    from tests.gitutil import engine_workspace, make_remote

    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url, poll_interval=0.3)
    plan = {"tasks": [task("a", ("hello", "out/a.txt")), task("b", ("bye", "out/b.txt"), checks=("check-002",))]}
    configure(ws, [level("good", "good.py")], planner=planner(tmp_path / "plans", plan), land="branch")
    d = daemon_factory(ws.root, env=GIT_ENV).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="engine ONLINE")

    async def main() -> None:
        params = StdioServerParameters(command=MP_ENGINE, args=["mcp", "--repo", url], env=env(tmp_path))
        async with Client(params) as client:
            await call(client, "send_mp", text=PLANNED.replace("Plan: auto", "Plan: review"))
            waits = await until_done(client, "MP-4.1")
            asked = waits["result"]["answerable"]
            assert asked["kind"] == "plan_review" and [t["title"] for t in asked["plan"]] == ["task a", "task b"]
            status = await call(client, "get_status")
            assert status["question"]["kind"] == "plan_review" and "approve" in status["answer_with"], status
            assert (await call(client, "answer", mp_id="MP-4.1", text="approve"))["sent"] is True
            for _ in range(60):
                got = await call(client, "wait_result", mp="MP-4.1", max_wait_s=2)
                if got["done"] and got.get("status") == "COMPLETED":
                    break
            assert got["status"] == "COMPLETED" and got["result"]["run_id"] == waits["result"]["run_id"], got

    anyio.run(main)
    d.signal(15)
    d.wait()
