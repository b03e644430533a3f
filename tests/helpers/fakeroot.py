"""Fake machine roots for the loader: an NVIDIA GPU with its driver, and /etc/ld.so.cache files
written as glibc's ldconfig writes them.

Three layouts: the current `glibc-ld.so.cache1.1` format alone (ldconfig's default since glibc
2.32), the old `ld.so-1.7.0` table alone, and "compat": the old table followed, at the next
8-byte boundary, by the new one. String offsets of the new table count from its own start; those
of the old one from the end of its entries. Checked against glibc's own reader (`ldconfig -p -C`)
in tests/test_loader_requires.py.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FLAG_ELF_LIBC6 = 0x0003
FLAG_X8664_LIB64 = 0x0300
FLAG_AARCH64_LIB64 = 0x0A00
X86_64 = FLAG_ELF_LIBC6 | FLAG_X8664_LIB64


def ld_cache(
    entries: Sequence[tuple[str, str, int] | tuple[str, str]], *, layout: str = "new"
) -> bytes:
    """The cache for (name, path[, flags]) entries (flags default: x86-64 libc6)."""
    rows = [(e[0], e[1], e[2] if len(e) == 3 else X86_64) for e in entries]
    if layout == "new":
        return _new(rows)
    strings, offsets = _strings(rows)
    old = struct.pack("=11sxI", b"ld.so-1.7.0", len(rows))
    for name, path, flags in rows:
        old += struct.pack("=iII", flags, offsets[name], offsets[path])
    if layout == "old":
        return old + strings
    if layout != "compat":
        raise ValueError(layout)
    # the new table hides in the old one's string area: old strings follow it
    start = (len(old) + 7) & ~7
    new = _new(rows)
    padding = start - len(old)
    shift = padding + len(new)
    old = struct.pack("=11sxI", b"ld.so-1.7.0", len(rows))
    for name, path, flags in rows:
        old += struct.pack("=iII", flags, offsets[name] + shift, offsets[path] + shift)
    return old + b"\0" * padding + new + strings


def _strings(rows: list[tuple[str, str, int]]) -> tuple[bytes, dict[str, int]]:
    table = b""
    offsets: dict[str, int] = {}
    for name, path, _ in rows:
        for text in (name, path):
            if text not in offsets:
                offsets[text] = len(table)
                table += text.encode() + b"\0"
    return table, offsets


def _new(rows: list[tuple[str, str, int]]) -> bytes:
    header = 48
    entries_size = 24 * len(rows)
    strings, offsets = _strings(rows)
    base = header + entries_size  # string offsets count from the table's start
    out = struct.pack(
        "=17s3sIIB3xI12x", b"glibc-ld.so.cache", b"1.1", len(rows), len(strings), 2, 0
    )
    for name, path, flags in rows:
        out += struct.pack("=iIIIQ", flags, base + offsets[name], base + offsets[path], 0, 0)
    return out + strings


def nvidia_machine(root: Path) -> Path:
    """A machine whose PCI bus has an NVIDIA display controller and whose driver is loaded."""
    device = root / "sys/bus/pci/devices/0000:01:00.0"
    device.mkdir(parents=True)
    (device / "class").write_text("0x030000\n")
    (device / "vendor").write_text("0x10de\n")
    (device / "device").write_text("0x2684\n")
    (root / "proc/driver/nvidia").mkdir(parents=True)
    return root


def run_loader(stage: Path, *args: str) -> dict[str, Any]:
    """`runtime_loader.py --json` of a stage, in a fresh process as an application runs it (a
    core, once loaded, stays in its process)."""
    out = subprocess.run(
        [sys.executable, "-I", str(stage / "runtime_loader.py"), "--json", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    decision: dict[str, Any] = json.loads(out)
    return decision
