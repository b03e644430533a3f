"""Filesystems that refuse writes, for the disk-error tests: a small tmpfs (ENOSPC), a
read-only bind mount (EROFS), and a build in a child process with a capability dropped
(EACCES as root) or a low RLIMIT_NOFILE (EMFILE). Mounting needs root (CAP_SYS_ADMIN): a
test skips, saying so, where the kernel refuses."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.project import FakeProject

ROOT = Path(__file__).resolve().parents[2]


def _mount(*args: str) -> None:
    if shutil.which("mount") is None:
        pytest.skip("mount is missing (Debian package mount)")
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"mount {' '.join(args)} was refused (needs root): {done.stderr.strip()}")


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


@contextlib.contextmanager
def tmpfs(path: Path, size_kib: int) -> Iterator[Path]:
    """A tmpfs of `size_kib` KiB at `path`: a disk that fills up."""
    path.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(path))
    try:
        yield path
    finally:
        _umount(path)


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """`path` bind-mounted over itself, read-only."""
    path.mkdir(parents=True, exist_ok=True)
    _mount("--bind", str(path), str(path))
    try:
        _mount("-o", "remount,bind,ro", str(path))
        yield path
    finally:
        _umount(path)


@dataclass(frozen=True)
class Outcome:
    code: int
    message: str  # what the user saw as the failure
    stdout: str


# run_build as `invoke build` calls it, in a child: argv is a JSON document of the options.
_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from ortbundle.cli import CommandFailed, run_build
    from ortbundle.config.retry import RetryPolicy
    from ortbundle.config.plan import BuildOptions

    args = json.loads(sys.argv[1])
    options = BuildOptions(
        product="fakeproduct", index_url=args["index"], cache_dir=Path(args["cache"]), jobs=1,
        retry=RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.05, read_timeout=10.0),
        environ=args["environ"],
    )
    try:
        run_build(options, root=Path(args["root"]), dist=Path(args["dist"]))
    except CommandFailed as exc:
        print(exc, file=sys.stderr)
        sys.exit(exc.code)
    """
)


def cli_build(
    fake: FakeProject,
    *,
    cache: Path,
    dist: Path,
    prefix: Sequence[str] = (),
    nofile: int | None = None,
    env: dict[str, str] | None = None,
) -> Outcome:
    """`invoke build` of the fake project in a child process, run under `prefix` (setpriv …)
    and with at most `nofile` open files."""
    args = {
        "index": fake.server.url,
        "cache": str(cache),
        "dist": str(dist),
        "root": str(fake.root),
        "environ": fake.environ,
    }
    child_env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "LC_ALL": "C.UTF-8",
        **(env or {}),
    }

    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    done = subprocess.run(
        [*prefix, sys.executable, "-c", _SCRIPT, json.dumps(args)],
        env=child_env,
        cwd=fake.root,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=limit,  # only sets a limit: no lock can be held in the child
        check=False,
    )
    return Outcome(done.returncode, done.stderr.strip(), done.stdout)
