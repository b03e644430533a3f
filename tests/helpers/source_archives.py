"""Source archives a test pins as a from-source component's corresponding source: gzipped
tarballs written reproducibly (sorted members, fixed times and owner), so a pin stays valid."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING

from tests.helpers.wheels import sha256_of

if TYPE_CHECKING:
    from tests.helpers.project import FakeProject


def write_source_tarball(path: Path, top: str, files: dict[str, bytes]) -> str:
    """`files` under `top/` in a .tar.gz at `path`; returns its SHA-256."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime, info.mode = len(data), 1700000000, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out, gzip.GzipFile(filename="", fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return sha256_of(path)


def build_table(source: str, archives: dict[str, str], sha256: dict[str, str]) -> str:
    """The recipe text that pins `archives` (id -> project path) as `source`'s sources."""
    lines = [
        f"[sources.{source}.build]",
        f"sources = [{', '.join(repr(a).replace(chr(39), chr(34)) for a in archives)}]",
        'command = "cmake -S ort-rocket -B build -DORT_HEADER_DIR=third_party && '
        'cmake --build build"',
        'toolchain = "aarch64-linux-gnu-gcc 14.2"',
        'ort_headers = "1.24.4"',
        "",
    ]
    for sid, path in archives.items():
        lines += [f"[sources.{sid}]", f'path = "{path}"', f'sha256 = "{sha256[sid]}"', ""]
    return "\n".join(lines) + "\n"


ARCHIVES = {"ort-rocket": "third_party/ort-rocket.tar.gz", "userspace": "third_party/us.tar.gz"}


def pin_sources(fake: FakeProject, archives: dict[str, str] = ARCHIVES) -> dict[str, str]:
    """Write the source archives into the project and pin them as the linux wheel's sources."""
    sha256 = {
        sid: write_source_tarball(
            fake.root / path, sid, {"CMakeLists.txt": f"project({sid})\n".encode()}
        )
        for sid, path in archives.items()
    }
    recipe = fake.root / "recipes" / "fake.toml"
    text = recipe.read_text()
    head, tail = text.split("[targets.linux-x86_64]", 1)
    extra = build_table("linux", archives, sha256)
    recipe.write_text(f"{head}{extra}[targets.linux-x86_64]{tail}")
    return sha256
