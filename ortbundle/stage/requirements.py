"""What the user's machine must provide, resolved once per target: every output renders it.

The closure finds each library a staged runtime needs but does not carry (`ExternalLibrary`), and
the binaries say how old a system they run on (binaries/baseline.py). What that means for the
user is decided here, once:

- a library is optional when its group says so, or when only plugin EPs need it (a plugin EP is
  an accelerator its runtime works without); across a target it is required as soon as one
  runtime cannot work without it;
- the oldest system is what the binaries need, raised to the product's `[system]` promise for
  the target's operating system (a product that says Windows 10 is installed on Windows 10
  only); a runtime needing newer than the promise stops the build here, or with
  `on_newer = "warn"` is shipped with a warning.

A core's table of optional provider libraries it does not ship is no requirement: it is kept
here as offered by the core, not shipped, for the summary and runtimes.json to tell.

The summary, runtimes.json, the installer, the Linux packages, the Flatpak, the SBOM and the
report render this model — the evidence through its JSON form in closures/<target>.json — so no
two of them can tell a user different things.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ortbundle.config.products import SystemSpec
from ortbundle.config.recipes import Recipe
from ortbundle.config.targets import get_target
from ortbundle.stage.binaries.baseline import Minimum, SystemBaseline, version_key
from ortbundle.stage.binaries.loads import OfferedProvider
from ortbundle.stage.closure import ExternalLibrary
from ortbundle.stage.staging import StagedRuntime
from ortbundle.stage.system import check_runtime, package_system, runtime_system, violations

PLUGIN_KIND = "plugin-ep"
PAIRED_KINDS = (PLUGIN_KIND, "custom-ops", "uses-core")  # shipped beside a core, paired with it
# the minima a product's [system] can promise, by the operating system they belong to
_PROMISES = {"linux": "glibc", "windows": "windows", "android": "android_api", "macos": "macos"}
_MINIMA = ("glibc", "gcc", "opencl", "windows", "msvc", "android_api", "macos")


@dataclass(frozen=True)
class RuntimeRequirements:
    """One staged runtime or plugin EP: what it needs of the user's machine."""

    name: str  # the recipe: "openvino", "ep-nv-tensorrt-rtx"
    directory: str  # runtimes/openvino, plugins/ep-nv-tensorrt-rtx
    plugin: bool  # a plugin EP: everything it needs is optional for the runtimes it pairs with
    pairs_with: tuple[str, ...]  # a plugin EP's runtimes; () for a runtime
    externals: tuple[ExternalLibrary, ...]  # needed_by named as in its directory, optional resolved
    system: SystemBaseline  # the oldest system it runs on, the product's promise included
    warnings: tuple[str, ...]  # "fake needs glibc 2.34 (…), newer than the glibc 2.28 …"
    # provider libraries its core's table names and the runtime does not carry: loaded only
    # when a session asks for the provider, so no requirement — told, never checked
    offered: tuple[OfferedProvider, ...] = ()

    @property
    def runs_on(self) -> str:
        return runs_on(self.system)


def offered_json(offered: Iterable[OfferedProvider]) -> list[dict[str, str]]:
    """What runtimes.json and closures/<target>.json say of each provider library offered by
    the core, not shipped."""
    return [{"library": o.name, "provider": o.provider, "named_by": o.file} for o in offered]


@dataclass(frozen=True)
class RequirementGroup:
    """One external group as a user is told about it: required unless every one of its
    libraries is optional, with the group's version, install sentence and note."""

    group: str
    kind: str
    optional: bool
    version: str
    install: str
    note: str
    sandbox: bool
    libraries: tuple[ExternalLibrary, ...]  # sorted by name, without case

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.libraries)


@dataclass(frozen=True)
class TargetRequirements:
    """One target: its runtimes' requirements and the package's (every runtime together)."""

    target: str
    runtimes: tuple[RuntimeRequirements, ...]
    # one record per library name (sorted without case), needed_by as staged paths
    # (runtimes/openvino/libonnxruntime.so.1): optional only where no runtime requires it
    externals: tuple[ExternalLibrary, ...]
    system: SystemBaseline  # the oldest system the whole package runs on, promise included

    @property
    def runs_on(self) -> str:
        return runs_on(self.system)

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(w for r in self.runtimes for w in r.warnings)

    @property
    def groups(self) -> tuple[RequirementGroup, ...]:
        return requirement_groups(self.externals)

    def runtime(self, name: str) -> RuntimeRequirements:
        return next(r for r in self.runtimes if r.name == name)

    def index_requires(self, runtime: str) -> tuple[ExternalLibrary, ...]:
        """What a loader checks before it picks `runtime`: its own needs and those of the plugin
        EPs paired with it (optional), a required record beating an optional one of the name."""
        found: dict[str, ExternalLibrary] = {}
        owners = [r for r in self.runtimes if r.name == runtime or runtime in r.pairs_with]
        for owner in owners:
            for ext in owner.externals:
                earlier = found.get(ext.name)
                if earlier is None or (earlier.optional and not ext.optional):
                    found[ext.name] = ext
        return tuple(found[name] for name in sorted(found, key=str.lower))

    def as_json(self) -> dict[str, Any]:
        """The model as evidence carries it (closures/<target>.json): what the SBOM and the
        report render, for a build and for a release merged from runners alike."""
        return {
            "target": self.target,
            "runs_on": self.runs_on,
            "system": self.system.as_json(),
            "externals": [external_json(e) for e in self.externals],
            "runtimes": [
                {
                    "name": r.name,
                    "directory": r.directory,
                    "plugin": r.plugin,
                    "runs_on": r.runs_on,
                    "system": r.system.as_json(),
                    "externals": [external_json(e) for e in r.externals],
                    "warnings": list(r.warnings),
                    **({"offered_not_shipped": offered_json(r.offered)} if r.offered else {}),
                }
                for r in self.runtimes
            ],
        }


def runs_on(system: SystemBaseline) -> str:
    """'Windows 10 (10.0), Visual C++ runtime ≥ 14.0'; "" when nothing versioned is needed."""
    return system.describe() if any(getattr(system, k) for k in _MINIMA) else ""


def external_json(external: ExternalLibrary) -> dict[str, Any]:
    item = asdict(external)
    item["needed_by"] = list(external.needed_by)
    return item


def requirement_groups(externals: Iterable[ExternalLibrary]) -> tuple[RequirementGroup, ...]:
    """The externals by group, required groups first, each group by name."""
    by_group: dict[str, list[ExternalLibrary]] = {}
    for ext in externals:
        by_group.setdefault(ext.group, []).append(ext)
    groups = []
    for name, members in by_group.items():
        first = next((e for e in members if not e.optional), members[0])
        groups.append(
            RequirementGroup(
                group=name,
                kind=first.kind,
                optional=all(e.optional for e in members),  # one required name: required
                version=next((e.version for e in members if e.version), ""),
                install=next((e.install for e in members if e.install), ""),
                note=next((e.note for e in members if e.note), ""),
                sandbox=all(e.sandbox for e in members),
                libraries=tuple(sorted(members, key=lambda e: e.name.lower())),
            )
        )
    return tuple(sorted(groups, key=lambda g: (g.optional, g.group)))


def promised(system: SystemBaseline, spec: SystemSpec, os: str) -> SystemBaseline:
    """`system` raised to the product's `[system]` promise for `os`, where the promise is newer
    than what the binaries need: the product supports nothing older than it says."""
    field = _PROMISES.get(os)
    value = getattr(spec, field) if field else None
    if field is None or value is None:
        return system
    needed: Minimum | None = getattr(system, field)
    if needed is not None and version_key(needed.version) >= version_key(str(value)):
        return system
    shown = value if field == "android_api" else f'"{value}"'
    raised: dict[str, Any] = {
        field: Minimum(str(value), f"the product's [system] {field} = {shown}")
    }
    return replace(system, **raised)


def resolve(
    target: str,
    spec: SystemSpec,
    runtimes: Sequence[tuple[Recipe, StagedRuntime]],
    plugins: Mapping[str, tuple[str, ...]] | None = None,
) -> TargetRequirements:
    """The model of one target from its staged runtimes and plugin EPs (`plugins`: a plugin
    recipe's name -> the runtimes it pairs with). A runtime or plugin EP needing a newer
    system than `spec` promises stops the build here (on_newer = "error")."""
    os = get_target(target).os
    resolved = []
    for recipe, staged in runtimes:
        check_runtime(spec, staged, component=recipe.name, target=target, file=str(recipe.path))
        # a plugin EP, a custom-op library, a library using a core: the runtime works without it
        plugin = recipe.kind in PAIRED_KINDS
        resolved.append(
            RuntimeRequirements(
                name=recipe.name,
                directory=staged.directory,
                plugin=plugin,
                pairs_with=tuple((plugins or {}).get(recipe.name, ())) if plugin else (),
                externals=tuple(
                    replace(e, optional=True) if plugin else e for e in staged.closure.externals
                ),
                system=promised(runtime_system(staged), spec, os),
                warnings=tuple(
                    f"{recipe.name} {problem}"
                    for problem in violations(spec, runtime_system(staged))
                ),
                offered=staged.closure.offered,
            )
        )
    return TargetRequirements(
        target=target,
        runtimes=tuple(resolved),
        externals=_merged(resolved),
        system=promised(package_system(s for _, s in runtimes), spec, os),
    )


def _merged(runtimes: Sequence[RuntimeRequirements]) -> tuple[ExternalLibrary, ...]:
    """One record per library name over the target: who needs it (staged paths), required
    when any runtime requires it, needed (not only opened by name) when any needs it so."""
    merged: dict[str, ExternalLibrary] = {}
    for runtime in runtimes:
        for ext in runtime.externals:
            users = tuple(f"{runtime.directory}/{n}" for n in ext.needed_by)
            earlier = merged.get(ext.name)
            if earlier is None:
                merged[ext.name] = replace(ext, needed_by=users)
                continue
            merged[ext.name] = replace(
                earlier if earlier.optional <= ext.optional else ext,
                needed_by=tuple(sorted({*earlier.needed_by, *users})),
                optional=earlier.optional and ext.optional,
                via=_via(earlier.via, ext.via),
            )
    return tuple(sorted(merged.values(), key=lambda e: e.name.lower()))


def summary_lines(targets: Iterable[TargetRequirements]) -> list[str]:
    """What `invoke build -v` prints: per target the package's oldest system, each runtime's,
    and every runtime needing newer than the product promises."""
    lines = []
    for target in targets:
        if not target.runtimes:
            continue
        lines.append(f"{target.target} runs on: {target.system.describe()}")
        for runtime in target.runtimes:
            lines.append(f"  {runtime.name}: {runtime.system.describe()}")
            lines += [f"  WARNING: {w}" for w in runtime.warnings]
    return lines


def _via(one: str, other: str) -> str:
    """How a library two runtimes need is reached: the stronger need wins ("needed" over a
    first-use "delay" over a name opened at run time)."""
    order = ("needed", "delay", "loads")
    return min(one, other, key=lambda via: order.index(via) if via in order else 0)
