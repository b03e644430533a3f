"""A PEP 503 / PEP 691 package index on 127.0.0.1 with scriptable faults, for download tests."""

from __future__ import annotations

import hashlib
import html
import json
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.loopback import LoopbackServer, QuietHandler


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


class IndexServer(LoopbackServer):
    """A PEP 691/503 index on 127.0.0.1 (or https with `tls`), with every fault a test needs."""

    def __init__(self, *, tls: Path | None = None) -> None:
        super().__init__()
        self.files: dict[str, tuple[str, bytes]] = {}  # filename -> (project, bytes)
        self.faults = Faults()
        self.more = MoreFaults()
        self.tls = tls  # a directory holding cert.pem and key.pem
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Range)

    def add(self, project: str, path: Path) -> None:
        self.files[path.name] = (project, path.read_bytes())

    @property
    def url(self) -> str:
        return f"{self.origin}/simple/"

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

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                index.requests.append(("GET", self.path, self.headers.get("Range")))
                parts = [p for p in self.path.split("/") if p]
                if len(parts) == 2 and parts[0] == "simple":
                    project = parts[1]
                    if index.more.redirect_pages_to:
                        return self._redirect(index.more.redirect_pages_to + project + "/")
                    if not any(owner == project for owner, _ in index.files.values()):
                        return self.send(404, b"no such project")
                    as_json = (
                        "json" in self.headers.get("Accept", "") and not index.faults.html_only
                    )
                    body, ctype = index._page(project, as_json)
                    return self.send(200, body, ctype)
                if len(parts) == 2 and parts[0] == "files" and parts[1] in index.files:
                    if index.more.redirect_files_to:
                        return self._redirect(index.more.redirect_files_to + parts[1])
                    return self._file(parts[1], index.files[parts[1]][1])
                return self.send(404, b"not found")

            def _redirect(self, location: str) -> None:
                self.send(302, b"", headers={"Location": location})

            def _file(self, filename: str, data: bytes) -> None:
                faults, more = index.faults, index.more
                if faults.status_first:
                    status = faults.status_first.pop(0)
                    extra = {"Retry-After": faults.retry_after} if faults.retry_after else {}
                    return self.send(status, b"fault", headers=extra)
                if faults.body_override is not None:
                    data = faults.body_override
                span = self.range_span(len(data), honour=not faults.ignore_range)
                if span is None:
                    return None
                start, end = span
                body = data[start:end]
                headers = {"Content-Type": "application/octet-stream"}
                if more.no_length:
                    headers["Connection"] = "close"
                    self.close_connection = True
                else:
                    headers["Content-Length"] = str(len(body))
                asked = not faults.ignore_range and bool(self.headers.get("Range"))
                self.begin_body(start, len(data), headers, end, ranged=asked or None)
                if faults.reset_after is not None:  # a clean close (FIN) mid-body, once
                    cut, faults.reset_after = faults.reset_after, None
                    return self.cut_off(body[:cut])
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

        with self.serving(Handler, tls=self.tls):
            try:
                yield self
            finally:
                self.more.release.set()  # ends any stall before the server shuts down
