"""What a tunnel (cloudflared, ngrok, Tailscale Funnel) is to `mp-engine mcp --http`, on
loopback: a TLS endpoint with a certificate for a public name (`mp.test`, from a test CA
the client trusts) that forwards each request, Host header and all, to the server's plain
HTTP port, appending the address it saw to X-Forwarded-For as those tunnels do (whatever
the client wrote there stays, to the left); and an httpx2 transport that reaches
`https://mp.test:PORT` on 127.0.0.1 (from another loopback address when asked, a client
of its own) while keeping the name for the Host header and the certificate check (SNI)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import httpx2
import trustme

NAME = "mp.test"


class Tunnel:
    """`forwards_for=False`: a tunnel that sets no X-Forwarded-For (whatever a client wrote
    there reaches the server as written)."""

    def __init__(self, backend_port: int, forwards_for: bool = True):
        self.backend_port = backend_port
        self.forwards_for = forwards_for
        self.ca = trustme.CA()
        self.cert = self.ca.issue_cert(NAME)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"https://{NAME}:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Tunnel:
        self._thread.start()
        assert self._ready.wait(10), "the tunnel did not start"
        return self

    def __exit__(self, *exc: Any) -> None:
        async def close() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._loop.stop()

        self._loop.call_soon_threadsafe(lambda: self._loop.create_task(close()))
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.cert.configure_cert(context)
        server = self._loop.run_until_complete(asyncio.start_server(self._pipe, "127.0.0.1", self.port, ssl=context))
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.backend_port)
        except OSError:
            writer.close()
            return
        seen = writer.get_extra_info("peername")[0]
        upstream = _requests(reader, up_writer, seen) if self.forwards_for else _copy(reader, up_writer)
        await asyncio.gather(upstream, _copy(up_reader, writer))

    # -- the client's side ---------------------------------------------------------------

    def transport(self, local_address: str | None = None) -> httpx2.AsyncBaseTransport:
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return _Resolved(httpx2.AsyncHTTPTransport(verify=context, local_address=local_address))

    def client(self, local_address: str | None = None, **kwargs: Any) -> httpx2.AsyncClient:
        """A client of the tunnel; `local_address` (127.0.0.2, ...) makes it another one."""
        return httpx2.AsyncClient(transport=self.transport(local_address), timeout=60, **kwargs)

    @contextlib.contextmanager
    def sync_client(self, local_address: str | None = None) -> Iterator[httpx2.Client]:
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        inner = httpx2.HTTPTransport(verify=context, local_address=local_address)
        with httpx2.Client(transport=_SyncResolved(inner), timeout=60) as c:
            yield c


async def _copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError, ssl.SSLError):
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    with contextlib.suppress(OSError, RuntimeError):
        dst.close()


async def _requests(src: asyncio.StreamReader, dst: asyncio.StreamWriter, seen: str) -> None:
    """Each request's head with `X-Forwarded-For: ..., <seen>` appended, then its body (by
    Content-Length; a chunked body ends the parsing, the rest is copied as it comes)."""
    with contextlib.suppress(OSError, asyncio.IncompleteReadError, ssl.SSLError, ValueError):
        while head := await src.readuntil(b"\r\n\r\n"):
            lines = head[:-4].split(b"\r\n")
            fields = [line for line in lines[1:] if not line.lower().startswith(b"x-forwarded-for:")]
            given = [
                line.split(b":", 1)[1].strip() for line in lines[1:] if line.lower().startswith(b"x-forwarded-for:")
            ]
            fields.append(b"X-Forwarded-For: " + b", ".join([*given, seen.encode()]))
            dst.write(b"\r\n".join([lines[0], *fields]) + b"\r\n\r\n")
            length = next((int(f.split(b":", 1)[1]) for f in fields if f.lower().startswith(b"content-length:")), 0)
            if any(f.lower().startswith(b"transfer-encoding:") for f in fields):
                break
            while length > 0:
                data = await src.read(min(length, 65536))
                if not data:
                    return
                dst.write(data)
                length -= len(data)
            await dst.drain()
    await _copy(src, dst)


def _local(request: httpx2.Request) -> httpx2.Request:
    """The same request sent to 127.0.0.1; its Host header and SNI keep the public name."""
    if request.url.host != NAME:
        return request
    return httpx2.Request(
        request.method,
        request.url.copy_with(host="127.0.0.1"),
        headers=request.headers,
        stream=request.stream,
        extensions={**request.extensions, "sni_hostname": NAME},
    )


class _Resolved(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport):
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await self.inner.handle_async_request(_local(request))

    async def aclose(self) -> None:
        await self.inner.aclose()


class _SyncResolved(httpx2.BaseTransport):
    def __init__(self, inner: httpx2.BaseTransport):
        self.inner = inner

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        return self.inner.handle_request(_local(request))

    def close(self) -> None:
        self.inner.close()
