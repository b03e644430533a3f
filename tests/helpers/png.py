"""A small PNG reader for the screenshot tests: 8-bit RGB/RGBA, non-interlaced (what Chromium
writes), enough to count the colours of a picture without an imaging library."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def read_png(path: Path, max_rows: int | None = None) -> tuple[int, int, list[bytes]]:
    """(width, height, the first `max_rows` rows of pixel bytes, RGB or RGBA)."""
    data = path.read_bytes()
    if not data.startswith(_SIGNATURE):
        raise ValueError("not a PNG")
    at, idat = len(_SIGNATURE), b""
    width = height = channels = 0
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        at += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(min(height, max_rows or height)):
        start = y * (stride + 1)
        method, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if method == 1:
                line[i] = (line[i] + left) & 0xFF
            elif method == 2:
                line[i] = (line[i] + up) & 0xFF
            elif method == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif method == 4:
                line[i] = (line[i] + _paeth(left, up, corner)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, rows


def distinct_colours(
    path: Path, max_rows: int = 500, saturation: int = 0, min_pixels: int = 1
) -> int:
    """Distinct RGB colours in the picture's top rows (pure Python: a few hundred rows); with
    `saturation`, only those whose channels differ by more (not the greys of text on white);
    with `min_pixels`, only those covering an area (not a glyph's anti-aliased edge)."""
    width, _, rows = read_png(path, max_rows)
    channels = len(rows[0]) // width if rows else 3
    seen: dict[bytes, int] = {}
    for row in rows:
        for x in range(0, len(row), channels):
            pixel = row[x : x + 3]
            if max(pixel) - min(pixel) > saturation:
                seen[pixel] = seen.get(pixel, 0) + 1
    return sum(1 for count in seen.values() if count >= min_pixels)
