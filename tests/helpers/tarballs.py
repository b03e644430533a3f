"""npm-style tarballs (gzip-compressed, members under package/), built in memory."""

from __future__ import annotations

import gzip
import io
import tarfile
import zipfile
from collections.abc import Mapping


def make_tarball(
    files: Mapping[str, bytes],
    *,
    symlinks: Mapping[str, str] | None = None,
    hardlinks: Mapping[str, str] | None = None,
    raw_names: tuple[tuple[str, bytes], ...] = (),
) -> bytes:
    """A .tgz of `files`; links and raw (possibly hostile) names are added as given."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in [*files.items(), *raw_names]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
        for name, target in (symlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
        for name, target in (hardlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.LNKTYPE
            info.linkname = target
            tar.addfile(info)
    return gzip.compress(buffer.getvalue(), mtime=0)


def make_aar(members: Mapping[str, bytes]) -> bytes:
    """An Android archive: a zip with AndroidManifest.xml, classes.jar and the given members."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("AndroidManifest.xml", '<manifest package="x"/>')
        archive.writestr("classes.jar", b"PK\x05\x06" + b"\0" * 18)
        for name, data in sorted(members.items()):
            archive.writestr(name, data)
    return buffer.getvalue()
