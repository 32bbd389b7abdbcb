"""Scripted fakes of the model APIs on 127.0.0.1, for the real CLIs.

`FakeAnthropic` answers `POST /v1/messages` (streamed with SSE as the CLIs ask, or as one
JSON body) and `POST /v1/messages/count_tokens`; `fakeopenai.FakeOpenAI` answers the OpenAI
Responses and Chat Completions APIs; anything else gets 404. Each scenario is a function
of the request (and how many model calls came before) that returns the next `Turn`: text,
a tool call, an HTTP error, or silence. Every request is kept (`requests`), so a test can
assert what the CLI sent: the prompt, the tools, the tool results.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Turn:
    kind: str  # "text", "tool", "error", "hang"
    text: str = ""
    tool: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    error_type: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    fields: dict[str, Any] = field(default_factory=dict)  # more of the error body (OpenAI)


def text(body: str) -> Turn:
    return Turn("text", text=body)


def tool(name: str, **args: Any) -> Turn:
    return Turn("tool", tool=name, input=args)


def error(status: int, error_type: str, message: str, **headers: str) -> Turn:
    # `x-should-retry: false` tells the Anthropic SDK inside the CLI not to retry on its
    # own: the engine's behaviour on the error is what the test looks at.
    return Turn(
        "error", text=message, status=status, error_type=error_type, headers={"x-should-retry": "false", **headers}
    )


def hang(seconds: float) -> Turn:
    return Turn("hang", seconds=seconds)


Scenario = Callable[[dict[str, Any], int], Turn]


def user_text(req: dict[str, Any]) -> str:
    """All the text the request carries for the model from the user's side: the prompt and
    tool results (Anthropic `messages`, OpenAI Responses `input`, Chat Completions)."""
    out = []
    items = list(req.get("messages") or []) + list(req.get("input") if isinstance(req.get("input"), list) else [])
    for msg in items:
        if msg.get("type") == "function_call_output":
            out.append(str(msg.get("output")))
            continue
        if msg.get("role") in ("assistant", "developer", "system"):
            continue
        content = msg.get("content")
        if isinstance(content, str):
            out.append(content)
            continue
        for block in content or []:
            if block.get("type") in ("text", "input_text"):
                out.append(block.get("text", ""))
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                out.append(inner if isinstance(inner, str) else json.dumps(inner))
    return "\n".join(out)


def system_text(req: dict[str, Any]) -> str:
    system = req.get("system") or ""
    if isinstance(system, list):
        return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
    return str(system)


def nonce_of(req: dict[str, Any]) -> str:
    m = re.search(r"NONCE: ([0-9a-f]{8,})", user_text(req))
    assert m, "the engine's prompt carries the nonce"
    return m.group(1)


def workdir_of(req: dict[str, Any]) -> str:
    m = re.search(r"[Ww]orking directory: (\S+)", system_text(req))
    assert m, "claude's system prompt names its working directory"
    return m.group(1)


def is_title(req: dict[str, Any]) -> bool:
    """claude's request for a session title, sent beside the agent's own unless
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC is set (the presets do not set it)."""
    return "title (3-7 words)" in system_text(req)


def parrot(then: Scenario) -> Scenario:
    """A model that repeats its prompt for the whole first iteration (its protocol holds
    example claims with the real nonce; aider may ask twice in one run), then answers as
    `then`, counting its calls from its own first one."""
    echoed = [0]

    def scenario(req: dict[str, Any], count: int) -> Turn:
        said = user_text(req)
        if "## This iteration: 1 of" in said:
            echoed[0] += 1
            return text(said)
        return then(req, count - echoed[0])

    return scenario


def status_block(nonce: str, status: str = "COMPLETE", summary: str = "did it", blocked: str | None = None) -> str:
    done = status == "COMPLETE"
    block = (
        f"---LOOPR_STATUS---\nNONCE: {nonce}\nSTATUS: {status}\nEXIT_SIGNAL: {'true' if done else 'false'}\n"
        f"WORK_TYPE: code\nFILES_MODIFIED: 1\nERRORS: 0\nSUMMARY: {summary}\n---END_LOOPR_STATUS---\n"
    )
    if done:
        block += f'<mt_complete nonce="{nonce}">check-001: out/a.txt:1</mt_complete>\n'
    if blocked:
        block += f'<blocked nonce="{nonce}">{blocked}</blocked>\n'
    return block


class FakeServer:
    """The HTTP plumbing shared by the fakes: a threaded server on 127.0.0.1 that keeps
    every request (`requests`, each with its `_path`) and asks `reply` for the answer."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def is_call(self, req: dict[str, Any]) -> bool:
        """Whether `req` is a model call (counted for the scenario)."""
        raise NotImplementedError

    def calls(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if self.is_call(r)]

    def reply(self, h: Handler, req: dict[str, Any], count: int) -> None:
        raise NotImplementedError

    def _handler(self) -> type[Handler]:
        fake = self

        class Bound(Handler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    req = json.loads(body or b"{}")
                except ValueError:
                    req = {}
                req["_path"] = self.path
                req["_auth"] = self.headers.get("authorization") or self.headers.get("x-api-key") or ""
                with fake._lock:
                    fake.requests.append(req)
                    count = len(fake.calls()) - 1
                fake.reply(self, req, count)

        return Bound


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def json_reply(self, status: int, obj: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def sse_reply(self, events: list[tuple[str | None, dict[str, Any] | str]]) -> None:
        """Server-sent events, each `event: name` (when named) and `data: json`."""
        data = "".join(
            (f"event: {n}\n" if n else "") + f"data: {d if isinstance(d, str) else json.dumps(d)}\n\n"
            for n, d in events
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.json_reply(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})

    def hang(self, turn: Turn) -> None:
        time.sleep(turn.seconds)  # the point: an API that never answers in time
        self.json_reply(500, {"type": "error", "error": {"type": "api_error", "message": "late"}})


class FakeAnthropic(FakeServer):
    """Anthropic Messages: `POST /v1/messages` (SSE or one JSON body) and
    `/v1/messages/count_tokens`."""

    def is_call(self, req: dict[str, Any]) -> bool:
        path = req["_path"]
        return path.startswith("/v1/messages") and "count_tokens" not in path and not is_title(req)

    def messages(self) -> list[dict[str, Any]]:
        return self.calls()

    def reply(self, h: Handler, req: dict[str, Any], count: int) -> None:
        if "count_tokens" in req["_path"]:
            return h.json_reply(200, {"input_tokens": 100})
        if not req["_path"].startswith("/v1/messages"):
            return h.json_reply(404, {"type": "error", "error": {"type": "not_found_error", "message": req["_path"]}})
        # claude's side request for a title, beside the agent's: answered, not the scenario's.
        turn = text('{"title": "The task"}') if is_title(req) else self.scenario(req, count)
        if turn.kind == "hang":
            return h.hang(turn)
        if turn.kind == "error":
            err = {"type": "error", "error": {"type": turn.error_type, "message": turn.text}}
            return h.json_reply(turn.status, err, turn.headers)
        if turn.kind == "tool":
            block = {"type": "tool_use", "id": f"toolu_{len(self.requests)}", "name": turn.tool, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(turn.input)}]
            stop, full = "tool_use", {**block, "input": turn.input}
        else:
            block = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": turn.text}]
            stop, full = "end_turn", {"type": "text", "text": turn.text}
        msg = {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": req.get("model", "fake"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 1},
        }
        if not req.get("stream"):
            return h.json_reply(200, {**msg, "content": [full], "stop_reason": stop})
        h.sse_reply(
            [
                ("message_start", {"type": "message_start", "message": msg}),
                ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
                *(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": d}) for d in deltas),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": stop, "stop_sequence": None},
                        "usage": {"output_tokens": 20},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
        )
