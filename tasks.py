"""Invoke tasks: each is one call into the ortbundle package (`invoke --list`)."""

from __future__ import annotations

import errno
import importlib.util
import os
import shlex
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, overload

from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import Task
from invoke.tasks import task as invoke_task

from ortbundle._core.locations import keep_bytecode_in_cache

# first: the modules imported below, and by the tasks, then load compiled from the cache
# (ortbundle/__init__ imports nothing, so only it and locations.py are compiled each run).
# The other tasks import the command they run: a no-op build loads no other command's module.
keep_bytecode_in_cache()

from ortbundle._core.progress import (  # noqa: E402
    OUTPUT_EXIT,
    PIPE_EXIT,
    command_output,
    output_failed_message,
    output_failure,
)
from ortbundle.cli.build import run_audit, run_build, run_clean, run_fetch  # noqa: E402
from ortbundle.cli.common import USAGE_EXIT, CommandFailed, interrupted  # noqa: E402
from ortbundle.config.project import DEFAULT_PRODUCT, BuildOptions  # noqa: E402

# One short flag per option name, the same in every task: -p is always --product, and no task
# takes -h (it stays --help). An option not listed here has only its long form.
SHORT_FLAGS: dict[str, str] = {
    "product": "p",
    "target": "t",
    "channel": "c",
    "component": "c",
    "offline": "o",
    "index_url": "i",
    "jobs": "j",
    "release": "r",
    "dist": "d",
    "verbose": "v",
    "version": "V",
    "source": "s",
    "coordinates": "s",
    "force": "f",
    "manifest": "m",
    "fast": "F",
    "k": "k",
}


class _Task(Task[Any]):
    """A task whose short flags come from SHORT_FLAGS, not from the order of its parameters,
    and which says it was interrupted (invoke itself ends on Ctrl-C silently, with exit 1)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with command_output():
            try:
                result = super().__call__(*args, **kwargs)
            except KeyboardInterrupt:  # outside a command's guard (which says it itself)
                failed = interrupted(signal.SIGINT)
                raise Exit(str(failed), code=failed.code) from None
            except BrokenPipeError:  # a write past command_output (none is known)
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())  # nothing more to flush at exit
                raise Exit(code=PIPE_EXIT) from None  # as git or cat piped into head
            except Exit as exc:
                _refuse_lost_output(exc.code)  # the command's own failure goes first
                raise
            _refuse_lost_output(0)
        return result

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict[str, Any]:
        opts = super().arg_opts(name, default, taken_names)
        short = SHORT_FLAGS.get(name)
        if short and short not in opts["names"]:
            opts["names"].append(short)
        return opts


def _refuse_lost_output(code: int | None) -> None:
    """A command whose stdout or stderr could not be written (`invoke build > /dev/full`, a
    reader gone) ends with that: a closed pipe as `cat` does (141, unsaid), a full disk or an
    I/O error with the disk family's code and one line on stderr, if stderr can take it. A
    command that failed on its own keeps its code and message."""
    lost = output_failure()
    if lost is None or code:
        return
    stream, failure = lost
    if failure.errno == errno.EPIPE:
        raise Exit(code=PIPE_EXIT) from None
    message = output_failed_message(stream, failure, "the command's work is done, its output lost")
    raise Exit(None if stream == "stderr" else message, code=OUTPUT_EXIT) from None


@overload
def task(body: Callable[..., None], /) -> Task[Any]: ...
@overload
def task(**kwargs: Any) -> Callable[[Callable[..., None]], Task[Any]]: ...
def task(*args: Any, **kwargs: Any) -> Any:
    """invoke's @task with the short flags of SHORT_FLAGS (and no automatic ones)."""
    return invoke_task(*args, klass=_Task, auto_shortflags=False, **kwargs)


def _options(
    product: str,
    target: list[str],
    offline: bool,
    index_url: str | None,
    jobs: int,
    **more: Any,
) -> BuildOptions:
    return BuildOptions(
        product=product,
        targets=tuple(target),
        offline=offline,
        index_url=index_url,
        jobs=jobs,
        **more,
    )


_BUILD_HELP = {
    "product": f"product manifest under manifests/ (default: {DEFAULT_PRODUCT})",
    "target": "build only this target (repeatable)",
    "offline": "use the download cache only; name any artifact it lacks",
    "index-url": "Python package index to resolve wheels through (default: pip's configuration)",
    "jobs": "parallel workers (default: one per core)",
    "release": "strict: the licence audit accepts no review and only signed-off waivers, a "
    "signing key is required",
    "dist": "output directory (default: dist/ in the repository)",
    "compare": "report.html compares with this earlier build (default: the newest older version "
    "in dist/<product>/)",
    "verbose": "also print the detail tables: sizes, libraries, channel hints, licence audit",
    "json": "print the build summary as JSON on stdout (progress goes to stderr); the same "
    "document as dist/<product>/<version>/build-summary.json",
}


@task(iterable=["target"], help=_BUILD_HELP)
def build(
    c: Context,
    product: str = DEFAULT_PRODUCT,
    target: list[str] | None = None,
    offline: bool = False,
    index_url: str | None = None,
    jobs: int = 0,
    release: bool = False,
    dist: str | None = None,
    compare: str | None = None,
    verbose: bool = False,
    json: bool = False,
) -> None:
    """Fetch, prune, stage, audit and package a product into dist/<product>/<version>/."""
    try:
        run_build(
            _options(
                product,
                target or [],
                offline,
                index_url,
                jobs,
                release=release,
                compare=Path(compare) if compare else None,
            ),
            dist=Path(dist) if dist else None,
            verbose=verbose,
            as_json=json,
        )
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


@task(
    iterable=["channel"],
    help={
        "product": f"product manifest under manifests/ (default: {DEFAULT_PRODUCT})",
        "channel": "audit only this channel (repeatable; default: the product's channels; "
        "also: source, apk)",
        "release": "also fail on a licence needing review or a waiver not signed off, not only "
        "on refusals and gaps",
        "offline": "use the download cache only",
        "index-url": "Python package index to resolve wheels through",
        "json": "where to write the JSON report (default: dist/<product>/<version>.audit.json)",
    },
)
def audit(
    c: Context,
    product: str = DEFAULT_PRODUCT,
    channel: list[str] | None = None,
    release: bool = False,
    offline: bool = False,
    index_url: str | None = None,
    json: str | None = None,
) -> None:
    """Licence audit: every staged file attributed, every text present, the policy per channel."""
    options = _options(
        product,
        [],
        offline,
        index_url,
        0,
        release=release,
        audit_only=True,
        audit_channels=tuple(channel or ()),
    )
    try:
        run_audit(options, json_path=Path(json) if json else None)
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


@task(
    iterable=["target"],
    help={
        k: v
        for k, v in _BUILD_HELP.items()
        if k not in ("release", "dist", "compare", "verbose", "json")
    },
)
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


@task(
    iterable=["channel"],
    help={
        "channel": "arch, flatpak or nsis (repeatable; builds only the targets they package)",
        "product": f"product manifest under manifests/ (default: {DEFAULT_PRODUCT})",
        "offline": "use the download cache only",
        "index-url": "Python package index to resolve wheels through",
        "release": "strict audit and a required signing key",
        "verbose": _BUILD_HELP["verbose"],
    },
)
def package(
    c: Context,
    channel: list[str] | None = None,
    product: str = DEFAULT_PRODUCT,
    offline: bool = False,
    index_url: str | None = None,
    release: bool = False,
    verbose: bool = False,
) -> None:
    """Build the packages of some channels (with their stages, audit and signed manifest)."""
    options = _options(
        product, [], offline, index_url, 0, release=release, channels=tuple(channel or ())
    )
    try:
        run_build(options, verbose=verbose)
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


@task(
    help={
        "path": "a version directory, a target stage, or an unpacked package "
        "(default: dist/<product>/<version>)",
        "manifest": "the manifest.json to check against (default: in or beside PATH)",
        "target": "the target an unpacked package was built for",
        "public-key": "minisign public key (default: keys/<product>.pub); given, a signature "
        "is required",
        "signed": "require a valid signature: an unsigned development tree fails (exit 4)",
        "allow-unsigned": "the default for an unsigned development tree (its hashes checked); "
        "a tree whose manifest names a signing key never verifies without its signature",
        "product": f"product whose dist/ tree to verify by default ({DEFAULT_PRODUCT})",
    }
)
def verify(
    c: Context,
    path: str | None = None,
    manifest: str | None = None,
    target: str | None = None,
    public_key: str | None = None,
    signed: bool = False,
    allow_unsigned: bool = False,
    product: str = DEFAULT_PRODUCT,
) -> None:
    """Re-hash a tree against its build manifest: modified, missing, unexpected files; the
    signature too when there is one (a release), or when --signed asks for it."""
    from ortbundle.cli.verify import run_verify

    try:
        run_verify(
            Path(path) if path else None,
            manifest=Path(manifest) if manifest else None,
            target=target,
            public_key=Path(public_key) if public_key else None,
            allow_unsigned=allow_unsigned,
            product=product,
            signed=signed,
        )
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


@task(
    help={
        "product": f"whose key (default: {DEFAULT_PRODUCT})",
        "secret": "where to write the secret key (default: ~/.config/ortbundle/keys/<product>.key)",
        "public": "where to write the public key (default: keys/<product>.pub)",
        "force": "replace an existing secret key",
    }
)
def keygen(
    c: Context,
    product: str = DEFAULT_PRODUCT,
    secret: str | None = None,
    public: str | None = None,
    force: bool = False,
) -> None:
    """Create the Ed25519 (minisign) key pair that signs a product's build manifests."""
    from ortbundle.cli.keygen import run_keygen

    try:
        run_keygen(
            product,
            secret=Path(secret) if secret else None,
            public=Path(public) if public else None,
            force=force,
        )
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


@task(
    iterable=["source"],
    help={
        "component": "the recipe to move (recipes/<component>.toml)",
        "version": "the version to pin (default: the newest release with a file for every source)",
        "source": "move only this source (repeatable), e.g. the openvino wheel of a recipe",
        "index-url": "Python package index (default: pip's configuration)",
        "no-build": "skip the old/new builds and the bump report",
        "force": "write the recipe even if the new pin does not build",
        "check": "change nothing; exit non-zero if any pin is stale, missing or could not be "
        "checked (4 mismatch, 3 gone or unreachable, 2 stale)",
        "json": "also write the report as JSON here",
    },
)
def pin(
    c: Context,
    component: str | None = None,
    version: str | None = None,
    source: list[str] | None = None,
    index_url: str | None = None,
    no_build: bool = False,
    force: bool = False,
    check: bool = False,
    json: str | None = None,
) -> None:
    """Pin a component to a published version, keeping its recipe's layout; print what changed."""
    from ortbundle.cli.pin import run_pin

    try:
        run_pin(
            component,
            version=version,
            sources=source or [],
            index_url=index_url,
            no_build=no_build,
            force=force,
            check=check,
            json_path=Path(json) if json else None,
        )
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


@task(
    iterable=["from_", "runner_key", "runner_manifest"],
    help={
        "from_": "a runner's dist/ (or dist/<product>/<version>) to merge (repeatable)",
        "product": f"product manifest under manifests/ (default: {DEFAULT_PRODUCT})",
        "release": "strict audit and a required signing key",
        "runner-key": "a public key that may sign a runner's manifest, besides "
        "keys/<product>.pub (repeatable)",
        "runner-manifest": "the SHA-256 of a runner's manifest.json, as CI's own channel gave "
        "it (repeatable; also $ORTBUNDLE_RUNNER_MANIFESTS)",
    },
)
def release(
    c: Context,
    from_: list[str] | None = None,
    product: str = DEFAULT_PRODUCT,
    release: bool = False,
    runner_key: list[str] | None = None,
    runner_manifest: list[str] | None = None,
) -> None:
    """Merge per-target builds from separate runners into one checked, signed release."""
    from ortbundle.cli.release import run_release

    try:
        run_release(
            BuildOptions(product=product, release=release),
            [Path(p) for p in from_ or []],
            runner_keys=[Path(k) for k in runner_key or []],
            runner_manifests=list(runner_manifest or []),
        )
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


# `path` is an option, not a positional argument: invoke would take `--help` as its value and
# export the cache into ./--help
@task(help={"path": "the directory to export to (required)"})
def cache_export(c: Context, path: str | None = None) -> None:
    """Copy every verified download into a plain directory (for CI caches, object stores)."""
    from ortbundle.cli.cache import run_cache_transfer

    try:
        run_cache_transfer("export", path)
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


@task(help={"path": "a directory written by cache-export (required)"})
def cache_import(c: Context, path: str | None = None) -> None:
    """Seed the download cache from a directory, re-hashing every entry."""
    from ortbundle.cli.cache import run_cache_transfer

    try:
        run_cache_transfer("import", path)
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


@task
def cache_verify(c: Context) -> None:
    """Re-hash every cached download; name and remove each corrupt one (exit 4 if any)."""
    from ortbundle.cli.cache import run_cache_verify

    try:
        run_cache_verify()
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


@task(
    help={
        "product": f"product manifest under manifests/ (default: {DEFAULT_PRODUCT})",
        "out": "where to write it (default: ci/<product>-github-actions.yml)",
    }
)
def ci_workflow(c: Context, product: str = DEFAULT_PRODUCT, out: str | None = None) -> None:
    """Write the GitHub Actions workflow: a job per target, then merge, sign and verify."""
    from ortbundle.cli.ci import run_ci_workflow

    try:
        run_ci_workflow(product, Path(out) if out else None)
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


@task(
    name="build-source",
    help={
        "component": "the recipe whose built archive to make again (recipes/<name>.toml)",
        "source": "which [sources.<id>] (default: its only one with a build table)",
    },
)
def build_source(c: Context, component: str | None = None, source: str | None = None) -> None:
    """Build a from-source component's archive from its pinned sources; hold it to the pin."""
    from ortbundle.cli.ci import run_build_source

    if not component:
        raise Exit(
            "ortbundle: usage error: name the component (--component NAME, a recipe with a "
            "[sources.<id>.build] table)",
            code=USAGE_EXIT,
        )
    try:
        run_build_source(component, source)
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


@task(
    name="templates",
    help={
        "list": "list each template, where it comes from (built-in or the project's) and "
        "the variables it receives (the default)",
        "copy": "copy this built-in template into templates/ to start from",
        "product": f"whose template directory ([packaging] templates; default: {DEFAULT_PRODUCT})",
    },
)
def templates_(
    c: Context, list: bool = False, copy: str = "", product: str = DEFAULT_PRODUCT
) -> None:
    """The templates packages are rendered from: list them, or copy one to replace it."""
    from ortbundle.cli.templates import run_templates

    if list and copy:
        raise Exit("ortbundle: usage error: --list or --copy, not both", code=USAGE_EXIT)
    try:
        run_templates(product=product, copy=copy or None)
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


@task(
    help={
        "check": "only check: exit 1 when docs/configuration.md, schemas/ or the loader's "
        "vendors.py is stale"
    }
)
def docs(c: Context, check: bool = False) -> None:
    """Write docs/configuration.md (every key of every input file) and the JSON Schemas under
    schemas/ (for editors) from ortbundle/config/schema/, and the loader's copy of
    ortbundle/data/gpu-vendors.toml (ortbundle/payload/loader/vendors.py)."""
    from ortbundle.cli.docs import run_docs

    try:
        run_docs(check=check, root=Path(__file__).resolve().parent)
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


@task
def clean(c: Context) -> None:
    """Remove dist/ (the download cache is kept)."""
    run_clean()


# The tiers `invoke test --fast` leaves out: the real downloads, every outside tool (and Wine,
# the APK tools, Chromium, qemu), and the few synthetic tests that take many seconds each.
SLOW_TIERS = ("real", "corpus", "tools", "apk", "windows", "arm", "chromium", "slow")
# pytest plugins the test command's own options need (-n/--dist, --timeout): module, distribution
TEST_PLUGINS = (("xdist", "pytest-xdist"), ("pytest_timeout", "pytest-timeout"))


@task(
    help={
        "fast": "the loop before a commit: synthetic tests only, no outside tool, none slow",
        "k": "only tests matching this expression",
        "jobs": "test processes (default: one per core; 1 runs every test in this process)",
    }
)
def test(c: Context, fast: bool = False, k: str = "", jobs: int = 0) -> None:
    """Run the whole test suite: unit, integration on synthetic inputs, and the real tier."""
    missing = [name for name, _ in TEST_PLUGINS if importlib.util.find_spec(name) is None]
    if missing:
        wanted = " ".join(dist for name, dist in TEST_PLUGINS if name in missing)
        raise Exit(
            f"invoke test needs {wanted}: python3 -m pip install -r requirements-dev.txt",
            code=USAGE_EXIT,
        )
    args = [sys.executable, "-m", "pytest"]
    workers = jobs or os.cpu_count() or 1
    if workers > 1:  # a test file per worker at a time: a module's fixtures are built once
        args += ["-n", str(workers), "--dist", "loadfile", "-p", "no:benchmark"]
    if fast:
        args += ["-m", f"not ({' or '.join(SLOW_TIERS)})"]
    if k:
        args += ["-k", k]
    result = c.run(shlex.join(args), pty=False, warn=True, env={"PYTHONDONTWRITEBYTECODE": "1"})
    code = result.exited if result is not None else 1
    if code:
        raise Exit(code=code)


@task(
    iterable=["module"],
    help={
        "module": "only this module (repeatable; default: every module in pyproject.toml's "
        "[tool.ortbundle.mutation])",
        "max_children": "mutants tested at once (default: 2)",
        "show": "also print what each surviving mutant changed",
    },
)
def mutation(
    c: Context, module: list[str] | None = None, max_children: int = 2, show: bool = False
) -> None:
    """Mutation-test the code that refuses (mutmut), each module with only its own tests; fail
    when a module kills fewer than 90 % of its mutants. Minutes per module (docs/testing.md)."""
    from devtools.invoke_mutation import run_mutation

    try:
        run_mutation(module or [], max_children=max_children, show=show)
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


@task(
    iterable=["target"],
    help={
        "product": f"product manifest under manifests/ (default: {DEFAULT_PRODUCT})",
        "target": "smoke only this built target (repeatable; default: every built target)",
        "dist": "output directory the build wrote (default: dist/ in the repository)",
        "scratch": "keep the scratch installs here (default: a temporary directory, removed)",
    },
)
def smoke(
    c: Context,
    product: str = DEFAULT_PRODUCT,
    target: list[str] | None = None,
    dist: str | None = None,
    scratch: str | None = None,
) -> None:
    """Install each built package with its own tool (pacman, the installer under Wine) and run
    every runtime and model it ships; one PASS/FAIL/NOT RUN line per runtime."""
    from ortbundle.cli.smoke import run_smoke

    try:
        run_smoke(
            product,
            target or [],
            root=Path(__file__).resolve().parent,
            dist=Path(dist) if dist else None,
            scratch=Path(scratch) if scratch else None,
        )
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None


@task(
    iterable=["target"],
    help={
        "coordinates": "pypi:PROJECT[==VERSION] (or just PROJECT), maven:GROUP:ARTIFACT[:VERSION] "
        "(an AAR) or npm:PACKAGE[@VERSION]",
        "version": "the release (default: the newest final one)",
        "name": "the recipe's name (default: from the coordinates)",
        "product": "also write manifests/PRODUCT.toml, a minimal product that ships it "
        "(an existing one: add to it)",
        "target": "only this target (repeatable; default: every target the release publishes)",
        "force": "replace an existing recipe (and product)",
        "index-url": "Python package index (default: pip's configuration)",
    },
)
def new_recipe(
    c: Context,
    coordinates: str = "",
    version: str | None = None,
    name: str | None = None,
    product: str | None = None,
    target: list[str] | None = None,
    force: bool = False,
    index_url: str | None = None,
) -> None:
    """Scaffold recipes/<name>.toml from a wheel, an AAR or an npm package: pins, roots, drops,
    licence texts; exit 8 when it is written but a choice is left to you."""
    from ortbundle.cli.scaffold import run_new_recipe
    from ortbundle.tools.scaffold import ScaffoldOptions

    if not coordinates:  # an option, not a positional: `new-recipe --help` must stay help
        raise Exit(
            "ortbundle: usage error: name what to scaffold (-s pypi:PROJECT[==V], "
            "maven:GROUP:ARTIFACT[:V] or npm:PACKAGE[@V])",
            code=USAGE_EXIT,
        )
    options = ScaffoldOptions(
        coordinates,
        version=version,
        name=name,
        product=product,
        targets=tuple(target or ()),
        force=force,
        index_url=index_url,
    )
    try:
        run_new_recipe(options)
    except CommandFailed as exc:
        raise Exit(str(exc), code=exc.code) from None
