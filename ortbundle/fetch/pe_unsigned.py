"""A PE file as it was before an Authenticode signature was appended to it.

Some vendors sign their DLLs after the wheel's RECORD was written (onnxruntime-ep-openvino
1.8.1 for Windows: 17 of its 24 members). Signing appends a certificate table, points the
header's security directory at it and recomputes the header's checksum; nothing else changes.
So such a member is the recorded file exactly when removing those three changes gives back the
bytes RECORD hashed — which this module computes in one streamed pass, without pefile, because
it runs during extraction (the fetch layer) on files of hundreds of MiB.
"""

from __future__ import annotations

import hashlib
import itertools
import struct
from collections.abc import Iterator
from pathlib import Path

_CHUNK = 1 << 20
_SECURITY = 4  # the data directory's certificate-table entry (PE/COFF: "Certificate Table")


def _layout(head: bytes) -> tuple[int, int] | None:
    """File offsets of the optional header's CheckSum and of the certificate-table directory
    entry, or None when `head` is no PE image with one."""
    if len(head) < 0x40 or head[:2] != b"MZ":
        return None
    pe = struct.unpack_from("<I", head, 0x3C)[0]
    optional = pe + 24
    if len(head) < optional + 2 or head[pe : pe + 4] != b"PE\0\0":
        return None
    magic = struct.unpack_from("<H", head, optional)[0]
    directories = optional + {0x10B: 96, 0x20B: 112}.get(magic, -optional - 1)
    if directories < optional:
        return None
    entry = directories + 8 * _SECURITY
    count_at = directories - 4  # NumberOfRvaAndSizes
    if len(head) < entry + 8 or struct.unpack_from("<I", head, count_at)[0] <= _SECURITY:
        return None
    return optional + 64, entry


def unsigned_sha256s(path: Path) -> tuple[str, ...]:
    """The sha256 values `path` had before its Authenticode signature was appended: with the
    certificate table removed and the PE checksum recomputed (PE/COFF: the 16-bit
    one's-complement sum of the file, its CheckSum field taken as zero, plus the file's
    length), or left zero (a linker that wrote none; the signer writes one). Empty when it
    carries no certificate table at its end."""
    size = path.stat().st_size
    with path.open("rb") as stream:
        head = bytearray(stream.read(4096))
    layout = _layout(bytes(head))
    if layout is None:
        return ()
    checksum_at, entry = layout
    table, table_size = struct.unpack_from("<II", head, entry)
    # the table is the file's last part (its length padded to 8 bytes or not); an image whose
    # directory points elsewhere was not merely signed, and is left to the RECORD check
    if (
        table_size == 0
        or table < entry + 8
        or size not in (table + table_size, table + table_size + (-table_size % 8))
    ):
        return ()
    head[entry : entry + 8] = bytes(8)
    head[checksum_at : checksum_at + 4] = bytes(4)
    del head[table:]
    # a run of bytes of even length read as one little-endian number is congruent to the sum
    # of its 16-bit words modulo 0xFFFF (2**16 is 1 there): big-number arithmetic folds
    residue = 0
    nonzero = False
    for chunk in _chunks(path, bytes(head), table):
        value = int.from_bytes(chunk + b"\0" * (len(chunk) % 2), "little")
        residue = (residue + value) % 0xFFFF
        nonzero = nonzero or value != 0
    folded = 0xFFFF if residue == 0 and nonzero else residue
    zero = bytes(head)
    head[checksum_at : checksum_at + 4] = struct.pack("<I", (folded + table) & 0xFFFFFFFF)
    summed, unsummed = hashlib.sha256(bytes(head)), hashlib.sha256(zero)
    for chunk in itertools.islice(_chunks(path, zero, table), 1, None):
        summed.update(chunk)
        unsummed.update(chunk)
    return summed.hexdigest(), unsummed.hexdigest()


def _chunks(path: Path, head: bytes, length: int) -> Iterator[bytes]:
    """The first `length` bytes of `path`, its first part replaced by `head`, in even chunks."""
    yield head
    with path.open("rb") as stream:
        stream.seek(len(head))
        left = length - len(head)
        while left > 0:
            chunk = stream.read(min(_CHUNK, left))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk
