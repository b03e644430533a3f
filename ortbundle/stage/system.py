"""The oldest system each runtime and each package runs on, checked against the product's promise.

The numbers come from the binaries (ortbundle/stage/binaries/baseline.py) through the closure each
staged runtime already carries; this module names them per runtime and per package, and holds
them against the product manifest's optional `[system]` table: a runtime that needs a newer
glibc, Windows, macOS or Android API level than the product promises stops the build, naming the
library and the symbol version, or, with `on_newer = "warn"`, is reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ortbundle._core.errors import ClosureError
from ortbundle.config.products import SystemSpec
from ortbundle.stage.binaries.baseline import Minimum, SystemBaseline, baseline, version_key
from ortbundle.stage.staging import StagedRuntime


def opened(staged: StagedRuntime, prefix: str = "") -> list[tuple[str, str]]:
    """(opener, library) for each library the runtime opens by name and cannot work without:
    its recipe's `loads` (not `optional_loads`), which date the oldest system as imports do."""
    return [
        (f"{prefix}{user}", e.name)
        for e in staged.closure.externals
        if e.via == "loads" and not e.optional
        for user in e.needed_by[:1]
    ]


def runtime_system(staged: StagedRuntime) -> SystemBaseline:
    """One runtime's baseline, from its kept libraries (named as staged) and the libraries it
    opens by name and needs."""
    return baseline(((k.name, k.info) for k in staged.closure.kept), opened(staged))


def package_system(runtimes: Iterable[StagedRuntime]) -> SystemBaseline:
    """A whole target's baseline: every runtime's kept libraries, named by staged path."""
    runtimes = list(runtimes)
    return baseline(
        ((f"{s.directory}/{k.name}", k.info) for s in runtimes for k in s.closure.kept),
        [pair for s in runtimes for pair in opened(s, f"{s.directory}/")],
    )


def violations(spec: SystemSpec, system: SystemBaseline) -> list[str]:
    """Every way `system` needs more than `spec` promises, one sentence each."""
    found: list[str] = []
    checks: Sequence[tuple[str, str | None, Minimum | None]] = (
        ("glibc", spec.glibc, system.glibc),
        ("Windows", spec.windows, system.windows),
        ("Android API", str(spec.android_api) if spec.android_api else None, system.android_api),
        ("macOS", spec.macos, system.macos),
    )
    for what, promised, needed in checks:
        if promised is None or needed is None:
            continue
        if version_key(needed.version) > version_key(promised):
            found.append(
                f"needs {what} {needed.version} ({needed.why}), newer than the "
                f"{what} {promised} the product supports"
            )
    return found


def check_runtime(
    spec: SystemSpec, staged: StagedRuntime, *, component: str, target: str, file: str
) -> list[str]:
    """Hold one runtime against `[system]`: raise (on_newer = "error") or return warnings."""
    problems = violations(spec, runtime_system(staged))
    if problems and spec.on_newer == "error":
        raise ClosureError(
            f"{component} {'; '.join(problems)}",
            component=component,
            target=target,
            file=file,
            fix="pin a build of the runtime made for older systems, or raise [system] in the "
            'product manifest (or set on_newer = "warn" to ship it anyway)',
        )
    return [f"{component} on {target} {p}" for p in problems]
