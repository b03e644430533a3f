"""A PEP 503 / PEP 691 package index on 127.0.0.1 with scriptable faults, for download tests."""

from __future__ import annotations

import hashlib
import html
import json
import socket
import ssl
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class Faults:
    """What the server does wrong. Counters decrement as faults are served."""

    status_first: list[int] = field(default_factory=list)  # statuses to answer before the file
    retry_after: str | None = None
    reset_after: int | None = None  # bytes sent before dropping the connection (once)
    ignore_range: bool = False
    publish_sha256: str | None = None  # a digest to publish instead of the real one
    publish_digest: bool = True
    html_only: bool = False
    body_override: bytes | None = None  # serve these bytes for every file


@dataclass
class MoreFaults:
    """File-download faults beyond `Faults`; each "once" fault is consumed when served."""

    rst_after: int | None = None  # send this many body bytes, then a TCP reset (once)
    stall_after: int | None = None  # send this many body bytes, then go quiet (every time)
    stall_times: int = 1_000_000  # how many responses stall before the server behaves
    stall_only: str | None = None  # stall only this file (by name)
    trickle: tuple[int, float] | None = None  # (bytes per write, seconds between writes)
    no_length: bool = False  # no Content-Length: the body ends when the connection closes
    redirect_files_to: str | None = None  # 302 every file to this base URL + filename
    redirect_pages_to: str | None = None  # 302 every project page to this base URL + project/
    file_base: str | None = None  # project pages link files at this absolute base URL
    release: threading.Event = field(default_factory=threading.Event)  # ends every stall
    stalled: threading.Event = field(default_factory=threading.Event)  # set when one begins


class IndexServer:
    """A PEP 691/503 index on 127.0.0.1 (or https with `tls`), with every fault a test needs."""

    def __init__(self, *, tls: Path | None = None) -> None:
        self.files: dict[str, tuple[str, bytes]] = {}  # filename -> (project, bytes)
        self.faults = Faults()
        self.more = MoreFaults()
        self.tls = tls  # a directory holding cert.pem and key.pem
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Range)
        self._server: ThreadingHTTPServer | None = None

    def add(self, project: str, path: Path) -> None:
        self.files[path.name] = (project, path.read_bytes())

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{host!s}:{port}/simple/"

    @property
    def files_url(self) -> str:
        return self.url.replace("/simple/", "/files/")

    def file_requests(self, filename: str) -> int:
        return sum(1 for _, path, _ in self.requests if path.endswith("/" + filename))

    def _page(self, project: str, as_json: bool) -> tuple[bytes, str]:
        entries = []
        for filename, (owner, data) in sorted(self.files.items()):
            if owner != project:
                continue
            digest = self.faults.publish_sha256 or hashlib.sha256(data).hexdigest()
            base = self.more.file_base or "../../files/"  # file_base: links on another server
            entries.append((filename, f"{base}{filename}", digest))
        if as_json:
            files = [
                {
                    "filename": name,
                    "url": url,
                    "hashes": {"sha256": digest} if self.faults.publish_digest else {},
                }
                for name, url, digest in entries
            ]
            body = json.dumps({"meta": {"api-version": "1.0"}, "name": project, "files": files})
            return body.encode(), "application/vnd.pypi.simple.v1+json"
        anchors = "".join(
            f'<a href="{html.escape(url)}'
            f'{"#sha256=" + digest if self.faults.publish_digest else ""}">{html.escape(name)}</a>\n'
            for name, url, digest in entries
        )
        return f"<!DOCTYPE html><html><body>{anchors}</body></html>".encode(), "text/html"

    @contextmanager
    def running(self) -> Iterator[IndexServer]:
        index = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def do_GET(self) -> None:
                index.requests.append(("GET", self.path, self.headers.get("Range")))
                parts = [p for p in self.path.split("/") if p]
                if len(parts) == 2 and parts[0] == "simple":
                    project = parts[1]
                    if index.more.redirect_pages_to:
                        return self._redirect(index.more.redirect_pages_to + project + "/")
                    if not any(owner == project for owner, _ in index.files.values()):
                        return self._send(404, b"no such project", "text/plain")
                    as_json = (
                        "json" in self.headers.get("Accept", "") and not index.faults.html_only
                    )
                    body, ctype = index._page(project, as_json)
                    return self._send(200, body, ctype)
                if len(parts) == 2 and parts[0] == "files" and parts[1] in index.files:
                    if index.more.redirect_files_to:
                        return self._redirect(index.more.redirect_files_to + parts[1])
                    return self._file(parts[1], index.files[parts[1]][1])
                return self._send(404, b"not found", "text/plain")

            def _redirect(self, location: str) -> None:
                self._send(302, b"", "text/plain", {"Location": location})

            def _send(
                self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for key, value in (extra or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

            def _file(self, filename: str, data: bytes) -> None:
                faults, more = index.faults, index.more
                if faults.status_first:
                    status = faults.status_first.pop(0)
                    extra = {"Retry-After": faults.retry_after} if faults.retry_after else {}
                    return self._send(status, b"fault", "text/plain", extra)
                if faults.body_override is not None:
                    data = faults.body_override
                start = 0
                header = self.headers.get("Range")
                if header and not faults.ignore_range and header.startswith("bytes="):
                    start = int(header[6:].split("-")[0])
                    if start >= len(data):
                        return self._send(416, b"", "text/plain")
                body = data[start:]
                self.send_response(206 if start else 200)
                self.send_header("Content-Type", "application/octet-stream")
                if more.no_length:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                else:
                    self.send_header("Content-Length", str(len(body)))
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                if faults.reset_after is not None:  # a clean close (FIN) mid-body, once
                    cut, faults.reset_after = faults.reset_after, None
                    self.wfile.write(body[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return None
                if more.rst_after is not None:
                    cut, more.rst_after = more.rst_after, None
                    self.wfile.write(body[:cut])
                    self.wfile.flush()
                    # SO_LINGER 0: close() sends RST instead of FIN
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.connection.close()
                    self.close_connection = True
                    return None
                if (
                    more.stall_after is not None
                    and more.stall_times > 0
                    and more.stall_only in (None, filename)
                ):
                    more.stall_times -= 1
                    self.wfile.write(body[: more.stall_after])
                    self.wfile.flush()
                    more.stalled.set()
                    more.release.wait(60)
                    self.close_connection = True
                    return None
                if more.trickle is not None:
                    size, pause = more.trickle
                    for at in range(0, len(body), size):
                        self.wfile.write(body[at : at + size])
                        self.wfile.flush()
                        if more.release.wait(pause):
                            break
                    return None
                self.wfile.write(body)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        if self.tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self.tls / "cert.pem", self.tls / "key.pem")
            server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.more.release.set()
            server.shutdown()
            server.server_close()
            thread.join()
