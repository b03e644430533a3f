"""Run-time loads: the libraries a kept file opens by name (dlopen, LoadLibrary), which neither
DT_NEEDED nor the import table shows.

A recipe declares them (`loads = [...]`, or `optional_loads` for the ones it works without);
each declared name must be a staged file of the runtime or an external group of the target, and
then counts among the closure's externals (`via = "loads"`): a needed one dates the oldest
system like an import does (DXCore, Direct3D 12: Windows 10), an optional one does not.
Detection backs the declaration up, in the manner of auditwheel's
`lddtree`: a kept file that imports a loader function (`dlopen`, `LoadLibrary*`) and whose
read-only data carries library-name strings that are neither staged, declared, already an
external of the closure, nor ignored with a reason, is a finding — unless the operating
system itself provides it (data/windows-system-dlls.toml, the target's system group) or it is
a provider library of the core's own table (`onnxruntime_providers_<name>` beside the provider
name the core holds), which the closure records as offered by the core, not shipped.
Everything here is a pure function of the files and the recipe; the stage runs it once per
pruned runtime, and the runtime memo keeps the result, so a warm build does not read a library
again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ortbundle._core.errors import ClosureError
from ortbundle.config.recipes import Recipe
from ortbundle.config.targets import Target
from ortbundle.stage.binaries.info import core_names, role
from ortbundle.stage.binaries.loads import (
    LoadFinding,
    UnresolvedLoad,
    runtime_loads,
    unresolved_error,
)
from ortbundle.stage.closure import ExternalLibrary
from ortbundle.stage.staging import StagedRuntime

# ones that can open libraries at all, else the entry library


def with_runtime_loads(staged: StagedRuntime, recipe: Recipe, target: Target) -> StagedRuntime:
    """The build's hook, on a fresh or a memoised runtime alike (no file is read): add the
    declared loads to the closure's externals (`via = "loads"`) and record the findings. The
    recipe's `loads` and `ignore_loads` are not part of the memo's key, so editing them never
    prunes a runtime again."""

    closure = staged.closure
    plan = recipe.for_target(target.name)
    names = {f.path.rsplit("/", 1)[-1] for f in staged.files}
    names |= {k.info.soname for k in closure.kept if k.info.soname}
    if recipe.kind == "uses-core":  # the core it opens is the paired runtime's, not a finding
        names |= set(core_names(n for f in closure.load_scans for n in f.scan.names))
    try:
        result = runtime_loads(
            scans=[(f.file, f.scan) for f in closure.load_scans],
            staged=names,
            loads=plan.loads,
            ignore=plan.ignore_loads,
            externals=[e.name for e in closure.externals],
            lookup=target.external_group,
            entry=closure.entry,
            case_insensitive=target.case_insensitive,
            os_provides=target.os_provides,
            # a core's table of the providers it may load: their libraries are no finding
            cores={k.name: k.info.ep_names for k in closure.kept if role(k.info) == "core"},
            optional=[n for rule in plan.optional_loads for n in rule.names],
        )
    except UnresolvedLoad as exc:
        raise unresolved_error(
            exc.names, component=recipe.name, target=target.name, file=str(recipe.path)
        ) from None

    # a declared load resolved to its group through this same lookup: it is never None here
    # one declared in optional_loads is optional whatever its group says
    added = tuple(
        dataclasses.replace(load, optional=True) if d.optional else load
        for d in result.declared
        if (group := target.external_group(d.name)) is not None
        and (load := ExternalLibrary.of(d.name, group, d.needed_by, via="loads"))
    )
    externals = tuple(e for e in closure.externals if e.via != "loads") + added
    closure = dataclasses.replace(
        closure,
        externals=tuple(sorted(externals, key=lambda e: (e.name, e.group))),
        load_findings=result.findings,
        offered=result.offered,
    )
    return dataclasses.replace(staged, closure=closure)


def refuse_undeclared(
    findings: Sequence[LoadFinding], *, component: str, target: str, file: str
) -> ClosureError:
    """`--release`: an undeclared run-time load is an under-reported requirement, not a note."""
    listing = "; ".join(f"{f.file} opens {', '.join(f.names)}" for f in findings)
    return ClosureError(
        f"undeclared run-time loads: {listing}",
        component=component,
        target=target,
        file=file,
        fix=f"declare each in [targets.{target}] loads (it must be a file of the runtime or an "
        f"external), or explain it in [[targets.{target}.ignore_loads]] names = [...] "
        'reason = "..."',
    )
