"""What the loopback test servers share: a quiet HTTP/1.1 handler and a server thread on 127.0.0.1.

Each server (index_server.py, maven_server.py, npm_server.py) subclasses `LoopbackServer`, writes
its `Handler` on `QuietHandler` inside its own `running()`, and serves it with `self.serving(...)`.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive, no request log on stderr, and the small answers every server sends."""

    protocol_version = "HTTP/1.1"
    content_type = "text/plain"  # what `send` labels a body as unless told otherwise

    def log_message(self, format: str, *args: object) -> None:
        return

    def send(
        self,
        status: int,
        body: bytes,
        content_type: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """A whole response: Content-Type, Content-Length, then `headers`, then `body`."""
        self.send_response(status)
        self.send_header("Content-Type", content_type or self.content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def range_start(self, size: int, *, honour: bool = True) -> int | None:
        """Where the body of `size` bytes starts: the N of a `Range: bytes=N-` header (0 without
        one, or when not `honour`ing it); None when N is at or past the end, having sent 416."""
        span = self.range_span(size, honour=honour)
        return None if span is None else span[0]

    def range_span(self, size: int, *, honour: bool = True) -> tuple[int, int] | None:
        """The [start, end) of `size` bytes a Range header asks for — `bytes=N-`, `bytes=N-M`
        or the last S bytes, `bytes=-S` — the whole when there is none (or it is not honoured);
        None when it cannot be satisfied, having sent 416."""
        header = self.headers.get("Range")
        if not (honour and header and header.startswith("bytes=")):
            return 0, size
        first, _, last = header[6:].partition("-")
        if not first:  # a suffix: the last S bytes
            return max(0, size - int(last)), size
        start = int(first)
        if start >= size:
            self.send(416, b"")
            return None
        return start, min(size, int(last) + 1) if last else size

    def begin_body(
        self,
        start: int,
        size: int,
        headers: Mapping[str, str],
        end: int | None = None,
        ranged: bool | None = None,
    ) -> None:
        """The status line and headers for bytes [start, end) of `size`: 206 and Content-Range
        for a range (by default: one that is not the whole file), else 200."""
        end = size if end is None else end
        ranged = (bool(start) or end < size) if ranged is None else ranged
        self.send_response(206 if ranged else 200)
        for key, value in headers.items():
            self.send_header(key, value)
        if ranged:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.end_headers()

    def cut_off(self, sent: bytes) -> None:
        """Send `sent`, then close the connection cleanly (FIN) though the body is not done."""
        self.wfile.write(sent)
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)


class LoopbackServer:
    """A server on 127.0.0.1 at a free port, running while `serving(handler)` lasts."""

    def __init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._scheme = "http"

    @property
    def origin(self) -> str:
        """`scheme://127.0.0.1:port` of the server (the last one, once it has stopped)."""
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"{self._scheme}://{host!s}:{port}"

    @contextmanager
    def serving(
        self, handler: type[BaseHTTPRequestHandler], *, tls: Path | None = None
    ) -> Iterator[None]:
        """Serve `handler` on a daemon thread; https when `tls` names a directory holding
        cert.pem and key.pem. Stops the server and joins the thread on the way out."""
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls / "cert.pem", tls / "key.pem")
            server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._scheme = "http" if tls is None else "https"
        thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
        thread.start()
        try:
            yield
        finally:
            server.shutdown()
            server.server_close()
            thread.join()
