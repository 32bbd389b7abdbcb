"""A local HTTP receiver for alerts (an Apprise `json://` URL posts to it): records every
JSON body; it can be down (not listening) for a while and come back on the same port."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fleetutil import free_port
from tests.gitutil import toml_value


def set_notify(config_file, **values: Any) -> None:
    """Replace the template's `[notify]` section of a workspace's mp-engine.toml."""
    import re

    text = config_file.read_text()
    text = re.sub(r"^\[notify\]\n(?:(?!\[|# \[).*\n)*", "", text, flags=re.M)
    config_file.write_text(text + "\n[notify]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in values.items()))


class Receiver:
    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self.got: list[dict[str, Any]] = []
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.port}/alerts"

    def start(self) -> Receiver:
        got = self.got

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                got.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.allow_reuse_address = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
