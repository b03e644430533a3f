"""Invoke tasks: each is one call into the ortbundle package (`invoke --list`)."""

from __future__ import annotations

import shlex
import sys

from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from ortbundle.build import DEFAULT_PRODUCT, BuildOptions
from ortbundle.cli import CommandFailed, run_build, run_clean, run_fetch


def _options(
    product: str, target: list[str], offline: bool, index_url: str | None, jobs: int
) -> BuildOptions:
    return BuildOptions(
        product=product,
        targets=tuple(target),
        offline=offline,
        index_url=index_url,
        jobs=jobs,
    )


_BUILD_HELP = {
    "product": f"product manifest under manifests/ (default: {DEFAULT_PRODUCT})",
    "target": "build only this target (repeatable)",
    "offline": "use the download cache only; name any artifact it lacks",
    "index-url": "Python package index to resolve wheels through (default: pip's configuration)",
    "jobs": "parallel workers (default: one per core)",
}


@task(iterable=["target"], help=_BUILD_HELP)
def build(
    c: Context,
    product: str = DEFAULT_PRODUCT,
    target: list[str] | None = None,
    offline: bool = False,
    index_url: str | None = None,
    jobs: int = 0,
) -> None:
    """Fetch, prune and stage every runtime of a product into dist/, then print the size table."""
    try:
        run_build(_options(product, target or [], offline, index_url, jobs))
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


@task(iterable=["target"], help=_BUILD_HELP)
def fetch(
    c: Context,
    product: str = DEFAULT_PRODUCT,
    target: list[str] | None = None,
    offline: bool = False,
    index_url: str | None = None,
    jobs: int = 0,
) -> None:
    """Download and verify a product's pinned artifacts into the cache; stage nothing."""
    try:
        run_fetch(_options(product, target or [], offline, index_url, jobs))
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


@task
def clean(c: Context) -> None:
    """Remove dist/ (the download cache is kept)."""
    run_clean()


@task(
    help={"fast": "skip the real tier (no downloads)", "k": "only tests matching this expression"}
)
def test(c: Context, fast: bool = False, k: str = "") -> None:
    """Run the whole test suite: unit, integration on synthetic inputs, and the real tier."""
    args = [sys.executable, "-m", "pytest"]
    if fast:
        args += ["-m", "not real"]
    if k:
        args += ["-k", k]
    result = c.run(shlex.join(args), pty=False, warn=True, env={"PYTHONDONTWRITEBYTECODE": "1"})
    code = result.exited if result is not None else 1
    if code:
        raise Exit(code=code)
