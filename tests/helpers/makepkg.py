"""makepkg as an unprivileged user in a directory that user owns: the Arch channel's tests
and the signing tests run the real makepkg through it."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.packages import EPOCH

NOBODY = 65534  # makepkg refuses to run as root; as root we drop to this uid/gid
APT_HINT = "apt-get install makepkg pacman-package-manager libarchive-tools fakeroot"


@dataclass
class Makepkg:
    """makepkg run as an unprivileged user in a directory that user owns."""

    root: Path
    prefix: tuple[str, ...]  # the privilege drop, empty when not root

    def copy(self, out: Path, name: str) -> Path:
        dest = self.root / name
        shutil.copytree(out, dest, symlinks=True)
        self._own(dest)
        return dest

    def copy_file(self, source: Path) -> Path:
        """`source` copied where makepkg's user can read it."""
        dest = self.root / source.name
        shutil.copyfile(source, dest)
        self._own(dest)
        return dest

    def run(
        self, startdir: Path, *args: str, carch: str = "x86_64"
    ) -> subprocess.CompletedProcess[str]:
        """makepkg in `startdir`; `carch`: the machine it builds for (CARCH, as Arch Linux ARM's
        makepkg.conf sets it), so an aarch64 PKGBUILD is checked on this x86_64 host."""
        dirs = {key: self.root / key.lower() for key in ("HOME", "BUILDDIR", "SRCDEST", "PKGDEST")}
        for path in dirs.values():
            path.mkdir(exist_ok=True)
            self._own(path)
        env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "LC_ALL": "C.UTF-8",
            "SOURCE_DATE_EPOCH": str(EPOCH),
            "PKGEXT": ".pkg.tar.gz",  # readable by tarfile whatever makepkg.conf prefers
            "CARCH": carch,
            **{key: str(path) for key, path in dirs.items()},
        }
        return subprocess.run(
            [*self.prefix, "makepkg", *args],
            cwd=startdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def gpg(self, *args: str) -> subprocess.CompletedProcess[str]:
        """gpg as makepkg's user, in the keyring makepkg reads ($HOME/.gnupg)."""
        home = self.root / "home"
        home.mkdir(exist_ok=True)
        self._own(home)
        return subprocess.run(
            [*self.prefix, "gpg", "--batch", "--no-tty", *args],
            env={"PATH": "/usr/bin:/bin", "HOME": str(home), "LC_ALL": "C.UTF-8"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def _own(self, top: Path) -> None:
        if not self.prefix:
            return
        for path in [top, *top.rglob("*")]:
            os.chown(path, NOBODY, NOBODY, follow_symlinks=False)


@contextlib.contextmanager
def unprivileged_makepkg() -> Iterator[Makepkg]:
    """A Makepkg whose user is not root (as root: nobody, through setpriv), or a skip naming
    what is missing."""
    missing = [tool for tool in ("makepkg", "bsdtar", "fakeroot") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed ({APT_HINT})")
    root = Path(tempfile.mkdtemp(prefix="ortbundle-makepkg-"))
    try:
        prefix: tuple[str, ...] = ()
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.skip("running as root and setpriv (util-linux) is missing to drop to nobody")
            prefix = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")
            root.chmod(0o755)
            os.chown(root, NOBODY, NOBODY)
            probe = subprocess.run(
                [*prefix, "test", "-w", str(root)], capture_output=True, text=True, check=False
            )
            if probe.returncode != 0:
                pytest.skip(
                    f"cannot drop privileges to uid {NOBODY} with a writable {root} "
                    f"(setpriv: {probe.stderr.strip() or probe.returncode})"
                )
        yield Makepkg(root, prefix)
    finally:
        shutil.rmtree(root, ignore_errors=True)
