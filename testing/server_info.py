"""A small HTTP server on 127.0.0.1 that answers GET /server_info with a recorded body, for
`patchkit verify --url` tests (it never listens beyond the loopback interface)."""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator


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


@contextlib.contextmanager
def answering(do_get: Callable[[BaseHTTPRequestHandler], None]) -> Iterator[tuple[str, list[str]]]:
    """A loopback server whose every request is answered by `do_get(handler)` (a hostile server
    in tests: one that hangs, trickles, redirects, sends too much). Yields (base URL, the methods
    it was asked with)."""
    methods: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def handle_one_request(self) -> None:
            try:
                super().handle_one_request()
            except OSError:  # the client hung up on a hostile answer: expected
                self.close_connection = True

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            methods.append("GET")
            do_get(self)

        def do_HEAD(self) -> None:  # noqa: N802
            methods.append("HEAD")

        def do_POST(self) -> None:  # noqa: N802
            methods.append("POST")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True  # a handler still trickling must not hold the test's end
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", methods
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
