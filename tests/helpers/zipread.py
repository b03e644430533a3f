"""A zip reader of our own (APPNOTE.TXT §4.3), not zipfile: where each entry's data really
starts in the file, how it is stored, and how many bytes it occupies. What the APK tier checks
the Android tools' alignment against."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

_EOCD = b"PK\x05\x06"
_CENTRAL = b"PK\x01\x02"
_LOCAL = b"PK\x03\x04"
STORED, DEFLATED = 0, 8


@dataclass(frozen=True)
class ZipEntry:
    name: str
    method: int  # 0 stored, 8 deflated
    compressed_size: int  # bytes the archive holds for it
    size: int  # bytes once extracted
    crc32: int
    header_offset: int  # its local file header
    data_offset: int  # its first data byte: what alignment is about


def read_entries(path: Path) -> dict[str, ZipEntry]:
    """Every entry by name, from the central directory, each located through its local header
    (whose extra field, not the central one's, is what zipalign pads)."""
    data = path.read_bytes()
    end = data.rfind(_EOCD, max(0, len(data) - 0xFFFF - 22))
    if end < 0:
        raise ValueError(f"{path.name}: no end of central directory record")
    count, _size, offset = struct.unpack_from("<HII", data, end + 10)
    entries: dict[str, ZipEntry] = {}
    for _ in range(count):
        if data[offset : offset + 4] != _CENTRAL:
            raise ValueError(f"{path.name}: broken central directory at {offset:#x}")
        method, _time, _date, crc, compressed, size, name_len, extra_len, comment_len = (
            struct.unpack_from("<HHHIIIHHH", data, offset + 10)
        )
        (header,) = struct.unpack_from("<I", data, offset + 42)
        name = data[offset + 46 : offset + 46 + name_len].decode("utf-8")
        if data[header : header + 4] != _LOCAL:
            raise ValueError(f"{path.name}: {name} has no local header at {header:#x}")
        local_name, local_extra = struct.unpack_from("<HH", data, header + 26)
        if name in entries:
            raise ValueError(f"{path.name}: {name} is in the archive twice")
        entries[name] = ZipEntry(
            name=name,
            method=method,
            compressed_size=compressed,
            size=size,
            crc32=crc,
            header_offset=header,
            data_offset=header + 30 + local_name + local_extra,
        )
        offset += 46 + name_len + extra_len + comment_len
    return entries


def read_data(path: Path, entry: ZipEntry) -> bytes:
    """An entry's bytes, read at its data offset (inflated if deflated), CRC-checked."""
    with path.open("rb") as stream:
        stream.seek(entry.data_offset)
        raw = stream.read(entry.compressed_size)
    if entry.method == STORED:
        data = raw
    elif entry.method == DEFLATED:
        data = zlib.decompressobj(-zlib.MAX_WBITS).decompress(raw)
    else:
        raise ValueError(f"{entry.name}: compression method {entry.method}")
    if len(data) != entry.size or zlib.crc32(data) != entry.crc32:
        raise ValueError(f"{entry.name}: its bytes do not match its size and CRC-32")
    return data
