"""The body cap: refused by Content-Length before a byte is read, refused while streaming a
body that has none, passed through whole below the cap."""

from __future__ import annotations

import anyio
import httpx2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from mp_engine.client.mcp.gate.body import BodyCap, megabytes

READ: list[int] = []


async def echo(request: Request) -> PlainTextResponse:
    body = await request.body()
    READ.append(len(body))
    return PlainTextResponse(str(len(body)))


APP = BodyCap(Starlette(routes=[Route("/", echo, methods=["POST"])]), 1000, lambda n: JSONResponse({"cap": n}, 413))


def post(content) -> httpx2.Response:
    async def main() -> httpx2.Response:
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=APP), base_url="http://t") as c:
            return await c.post("/", content=content)

    return anyio.run(main)


def test_a_body_over_the_cap_never_reaches_the_app():
    READ.clear()
    assert post(b"x" * 1001).json() == {"cap": 1000}

    async def chunks():  # no Content-Length: chunked
        for _ in range(50):
            yield b"y" * 100

    assert post(chunks()).status_code == 413
    assert READ == []


def test_a_body_within_the_cap_arrives_whole():
    assert post(b"z" * 1000).text == "1000"

    async def chunks():
        for _ in range(9):
            yield b"y" * 100

    assert post(chunks()).text == "900"
    assert megabytes(2 << 20) == "2 MiB" and megabytes(16 * 1024) == "16 KiB"
