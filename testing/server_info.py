"""A small HTTP server on 127.0.0.1 that answers GET /server_info with a recorded body, for
`patchkit verify --url` tests (it never listens beyond the loopback interface)."""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator


@contextlib.contextmanager
def serving(body: object, status: int = 200) -> Iterator[str]:
    """Yields the server's base URL; `body` is sent as JSON (bytes as they are)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    methods: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            methods.append("GET")
            code = status if self.path == "/server_info" else 404
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
