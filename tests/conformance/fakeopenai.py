"""A scripted fake of the OpenAI APIs on 127.0.0.1: Responses (`POST /v1/responses`, SSE,
with function calls; what `codex exec` speaks) and Chat Completions (`POST
/v1/chat/completions`, SSE or one JSON body; what aider speaks through litellm).

Scenarios are the same as for the Anthropic fake (fakemodel.py): a function of the request
and the number of model calls before it, returning a `Turn`. A tool turn is a Responses
`function_call` (codex runs commands through `exec_command {"cmd": ...}`); errors carry
`{"error": {...}}` with any extra fields a CLI reads (`usage_limit_reached`'s `resets_at`).
"""

from __future__ import annotations

import json
from typing import Any

from tests.conformance.fakemodel import FakeServer, Handler, Turn

USAGE = {
    "input_tokens": 100,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 20,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 120,
}


def openai_error(status: int, error_type: str, message: str, **fields: Any) -> Turn:
    return Turn("error", text=message, status=status, error_type=error_type, fields=fields)


def command(cmd: str) -> Turn:
    """codex's shell tool: run `cmd` in the workspace (under codex's sandbox)."""
    return Turn("tool", tool="exec_command", input={"cmd": cmd})


class FakeOpenAI(FakeServer):
    def is_call(self, req: dict[str, Any]) -> bool:
        return str(req["_path"]).startswith(("/v1/responses", "/v1/chat/completions"))

    def reply(self, h: Handler, req: dict[str, Any], count: int) -> None:
        path = req["_path"]
        if not self.is_call(req):
            return h.json_reply(404, {"error": {"type": "not_found", "message": path}})
        turn = self.scenario(req, count)
        if turn.kind == "hang":
            return h.hang(turn)
        if turn.kind == "error":
            err = {"message": turn.text, "type": turn.error_type, "code": turn.error_type, **turn.fields}
            return h.json_reply(turn.status, {"error": err}, turn.headers)
        if path.startswith("/v1/responses"):
            return self._response(h, turn, count)
        return self._chat(h, req, turn, count)

    def _response(self, h: Handler, turn: Turn, count: int) -> None:
        rid = f"resp_{count}"
        if turn.kind == "tool":
            item: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{count}",
                "call_id": f"call_{count}",
                "name": turn.tool,
                "arguments": json.dumps(turn.input),
            }
        else:
            text = {"type": "output_text", "text": turn.text, "annotations": []}
            item = {"type": "message", "role": "assistant", "id": f"msg_{count}", "content": [text]}
        h.sse_reply(
            [
                ("response.created", {"type": "response.created", "response": {"id": rid}}),
                ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
                ("response.completed", {"type": "response.completed", "response": {"id": rid, "usage": USAGE}}),
            ]
        )

    def _chat(self, h: Handler, req: dict[str, Any], turn: Turn, count: int) -> None:
        base = {"id": f"chatcmpl-{count}", "created": 1795600000, "model": req.get("model", "fake")}
        usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        if not req.get("stream"):
            choice = {"index": 0, "message": {"role": "assistant", "content": turn.text}, "finish_reason": "stop"}
            return h.json_reply(200, {**base, "object": "chat.completion", "choices": [choice], "usage": usage})
        chunk = {**base, "object": "chat.completion.chunk"}
        h.sse_reply(
            [
                (None, {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": turn.text}}]}),
                (None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}),
                (None, "[DONE]"),
            ]
        )
