"""The member names of a zip on a server, read with HTTP Range requests.

`invoke pin --check` asks what a newer release ships (a waived file it no longer carries means
the waiver can go) without downloading a wheel of hundreds of MiB: zipfile reads the end of
central directory record and the central directory, and each read here is one Range request
(two or three for a whole wheel). A server that ignores Range is refused rather than read
whole: the check stays cheap or says it could not look.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ortbundle._core.errors import FetchError
from ortbundle.fetch.http import request_with_retries

if TYPE_CHECKING:
    import requests

    from ortbundle.config.retry import RetryPolicy

_TAIL = 64 << 10  # the end of central directory record (and, for most wheels, the directory)
_TOTAL = re.compile(r"^bytes \d+-\d+/(\d+)$")


class _RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file: the tail fetched once, any other span by
    its own Range request."""

    def __init__(
        self,
        session: requests.Session,
        url: str,
        policy: RetryPolicy,
        headers: Mapping[str, str],
        what: str,
    ) -> None:
        super().__init__()
        self._session, self._url, self._policy = session, url, policy
        self._headers, self._what = dict(headers), what
        self._pos = 0
        body, total = self._get(f"bytes=-{_TAIL}")
        self._size = total
        self._tail_start = total - len(body)
        self._tail = body

    def _get(self, spec: str) -> tuple[bytes, int]:
        response = request_with_retries(
            self._session,
            self._url,
            self._policy,
            headers={**self._headers, "Range": spec},
            what=self._what,
        )
        assert response is not None  # allow_404 is off: a 404 raised
        ranged = _TOTAL.match(response.headers.get("Content-Range", ""))
        if response.status_code != 206 or ranged is None:
            raise FetchError(
                f"{self._what}: the server does not serve byte ranges (HTTP "
                f"{response.status_code}), so its member list cannot be read without "
                "downloading it",
                file=self._what,
                fix="use an index or mirror that honours Range requests (pip's resume needs "
                "them too)",
            )
        return response.content, int(ranged[1])

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._pos + size)
        if end <= self._pos:
            return b""
        if self._pos >= self._tail_start:
            data = self._tail[self._pos - self._tail_start : end - self._tail_start]
        else:
            data, _total = self._get(f"bytes={self._pos}-{end - 1}")
        self._pos += len(data)
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def remote_member_names(
    session: requests.Session,
    url: str,
    policy: RetryPolicy,
    *,
    what: str,
    headers: Mapping[str, str] | None = None,
) -> tuple[str, ...]:
    """Every member name of the zip at `url`, from its central directory alone."""
    remote = _RangeFile(session, url, policy, headers or {}, what)
    try:
        with zipfile.ZipFile(remote) as archive:
            return tuple(archive.namelist())
    except zipfile.BadZipFile as exc:
        raise FetchError(
            f"{what}: the server's file is not a readable zip ({exc})",
            file=what,
            fix="check the index: a wheel is a zip",
        ) from None
