"""A scripted fake of the Anthropic Messages API on 127.0.0.1, for the real CLIs.

It answers `POST /v1/messages` (streamed with SSE as the CLIs ask, or as one JSON body)
and `POST /v1/messages/count_tokens`; anything else gets 404. Each scenario is a function
of the request (and how many message requests came before) that returns the next `Turn`:
text, a tool call, an HTTP error, or silence. Every request is kept (`requests`), so a
test can assert what the CLI sent: the prompt, the tools, the tool results.
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
    """All the text of the request's user messages (the prompt and tool results)."""
    out = []
    for msg in req.get("messages") or []:
        content = msg.get("content")
        if isinstance(content, str):
            out.append(content)
            continue
        for block in content or []:
            if block.get("type") == "text":
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


class FakeAnthropic:
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

    def __enter__(self) -> FakeAnthropic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def messages(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["_path"].startswith("/v1/messages") and "count_tokens" not in r["_path"]]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _json(self, status: int, obj: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    req = json.loads(body or b"{}")
                except ValueError:
                    req = {}
                req["_path"] = self.path
                with fake._lock:
                    fake.requests.append(req)
                    count = len(fake.messages()) - 1
                if "count_tokens" in self.path:
                    return self._json(200, {"input_tokens": 100})
                if not self.path.startswith("/v1/messages"):
                    return self._json(
                        404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}}
                    )
                turn = fake.scenario(req, count)
                if turn.kind == "hang":
                    time.sleep(turn.seconds)  # the point: an API that never answers in time
                    return self._json(500, {"type": "error", "error": {"type": "api_error", "message": "late"}})
                if turn.kind == "error":
                    err = {"type": "error", "error": {"type": turn.error_type, "message": turn.text}}
                    return self._json(turn.status, err, turn.headers)
                self._message(req, turn)

            def _message(self, req: dict[str, Any], turn: Turn) -> None:
                if turn.kind == "tool":
                    block = {"type": "tool_use", "id": f"toolu_{len(fake.requests)}", "name": turn.tool, "input": {}}
                    deltas = [{"type": "input_json_delta", "partial_json": json.dumps(turn.input)}]
                    stop, full = "tool_use", {**block, "input": turn.input}
                else:
                    block = {"type": "text", "text": ""}
                    deltas = [{"type": "text_delta", "text": turn.text}]
                    stop, full = "end_turn", {"type": "text", "text": turn.text}
                msg = {
                    "id": f"msg_{len(fake.requests)}",
                    "type": "message",
                    "role": "assistant",
                    "model": req.get("model", "fake"),
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 100, "output_tokens": 1},
                }
                if not req.get("stream"):
                    return self._json(200, {**msg, "content": [full], "stop_reason": stop})
                events = [
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
                data = "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in events).encode()
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
