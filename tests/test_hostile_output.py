"""Hostile output: a command whose own stdout cannot be written (`> /dev/full`: ENOSPC) ends
with one line on stderr and exit 12 once its work is done, never a traceback; a build that
published before its summary could be written says it published (#44)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.faults import version_dir
from tests.helpers.project import FakeProject

ROOT = Path(__file__).resolve().parent.parent
FULL = Path("/dev/full")
OUTPUT_EXIT = 12  # docs/tasks.md: a write refused (the disk family)

# a task as invoke runs it (tasks.py's wrapper included), on the fake project: invoke prints an
# Exit's message on stderr and exits with its code
_TASK = textwrap.dedent(
    """
    import functools, sys
    from pathlib import Path
    from invoke.context import Context
    from invoke.exceptions import Exit
    import tasks

    root, name, *args = sys.argv[1:]
    tasks.run_build = functools.partial(tasks.run_build, root=Path(root))
    kwargs = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args}
    if "json" in kwargs:
        kwargs["json"] = True
    if "jobs" in kwargs:
        kwargs["jobs"] = int(kwargs["jobs"])
    try:
        getattr(tasks, name)(Context(), **kwargs)
    except Exit as exc:
        if exc.message:
            print(exc.message, file=sys.stderr)
        sys.exit(exc.code)
    """
)


def _full_stdout(
    argv: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    with FULL.open("w") as full:
        return subprocess.run(
            argv,
            cwd=ROOT,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
            timeout=300,
            check=False,
        )


def _assert_quiet_output_error(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == OUTPUT_EXIT, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "ortbundle: output error: could not write to stdout (ENOSPC" in done.stderr


@pytest.fixture(autouse=True)
def _dev_full() -> None:
    if not FULL.exists():
        pytest.skip("/dev/full is missing (not Linux)")


@pytest.mark.parametrize(
    "args", [["templates", "--list"], ["cache-verify"]], ids=["templates", "cache-verify"]
)
def test_a_full_stdout_ends_a_command_quietly(args: list[str], tmp_path: Path) -> None:
    done = _full_stdout(
        [sys.executable, "-m", "invoke", *args], {"ORTBUNDLE_CACHE_DIR": str(tmp_path)}
    )
    _assert_quiet_output_error(done)


def _task(fake: FakeProject, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**fake.environ, "ORTBUNDLE_CACHE_DIR": str(fake.root / "cache")}
    return _full_stdout([sys.executable, "-c", _TASK, str(fake.root), name, *args], env)


def test_a_build_a_no_op_and_verify_with_a_full_stdout(written: FakeProject) -> None:
    """The build publishes whole and says so; the no-op after it and `verify` of its tree end
    quietly too; `--json` after an input change publishes, then says it published."""
    index = f"index_url={written.server.url}"
    product_arg = "product=fakeproduct"
    done = _task(written, "build", product_arg, index, "jobs=1")
    _assert_quiet_output_error(done)
    assert "WAS PUBLISHED: " + str(version_dir(written)) in done.stderr, done.stderr
    assert (version_dir(written) / "manifest.json.minisig").is_file()
    _assert_quiet_output_error(_task(written, "build", product_arg, index, "jobs=1"))  # up to date
    verified = _task(
        written,
        "verify",
        "product=fakeproduct",
        f"path={version_dir(written)}",
        f"public_key={written.root / 'keys' / 'fakeproduct.pub'}",
    )
    _assert_quiet_output_error(verified)
    before = (version_dir(written) / "manifest.json").read_bytes()
    product = written.root / "manifests" / "fakeproduct.toml"
    product.write_text(product.read_text().replace("A synthetic product", "A newer product"))
    done = _task(written, "build", product_arg, index, "jobs=1", "json=1")
    _assert_quiet_output_error(done)
    assert "WAS PUBLISHED" in done.stderr and "build-summary.json" in done.stderr
    assert (version_dir(written) / "manifest.json").read_bytes() != before  # published
