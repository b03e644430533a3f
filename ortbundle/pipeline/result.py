"""What a build returns (BuildResult) and the summary document made from it, written as
build-summary.json; pipeline/summary.py reads and prints that document without importing this."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortbundle._core.peaks import memory_peaks
from ortbundle.pipeline.summary import SUMMARY_SCHEMA, mib_figure, summary_json

if TYPE_CHECKING:
    from rich.table import Table

    from ortbundle._core.progress import Phase

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ortbundle._core.fsio import atomic_write
from ortbundle._core.repairs import Repair
from ortbundle._core.version import __version__
from ortbundle.channels import ChannelOutput
from ortbundle.channels.packagers import development_compression
from ortbundle.config.plan import (
    Plan,
)
from ortbundle.config.vocabulary import CHANNEL_TARGETS, package_target
from ortbundle.evidence.names import MANIFEST_NAME, SBOM_NAME, SIGNATURE_NAME
from ortbundle.evidence.names import SUMMARY_NAME as SUMMARY_NAME  # the CLI names it
from ortbundle.fetch.artifacts import Artifact
from ortbundle.licensing.attribution import (
    ShippedFile,
    TargetLicensing,
)
from ortbundle.licensing.audit import ChannelAudit
from ortbundle.licensing.file_findings import guess_line
from ortbundle.stage.closure import ExternalLibrary
from ortbundle.stage.requirements import TargetRequirements, offered_json
from ortbundle.stage.requirements import requirement_groups as groups_of
from ortbundle.stage.staging import (
    StagedRuntime,
    StagedText,
)

_OTHER = "not a library"  # the members a runtime's archive has besides libraries: counted apart


def _reason_bucket(reason: str) -> str:
    return "alias" if reason.startswith("alias of ") else reason


def summary_document(
    result: BuildResult, phases: Sequence[Phase], *, release: bool
) -> dict[str, Any]:
    """The facts of a finished build, as build-summary.json carries them."""

    product = result.plan.product
    downloaded = sum(1 for a in result.artifacts.values() if a.downloaded)
    targets = []
    for target in result.targets:
        files = [f for f in target.files if f.link_to is None]
        runtimes = []
        for staged in target.runtimes:
            kept, dropped = staged.closure.kept, staged.closure.dropped
            why = Counter(_reason_bucket(d.reason) for d in dropped)
            runtimes.append(
                {
                    "name": staged.runtime,
                    "directory": staged.directory,
                    "files": len(kept),
                    "bytes": sum(k.size for k in kept),
                    "dropped": len(dropped),
                    "dropped_bytes": sum(d.size for d in dropped),
                    "dropped_why": dict(sorted(why.items())),
                    "not_libraries": staged.outside_globs,
                    "offered_not_shipped": offered_json(
                        target.requirements.runtime(staged.runtime).offered
                    ),
                }
            )
        # what the user's machine must provide: the target's requirements model
        requirements = target.requirements
        # once per guess the scaffold left in a licence rule, however many channels audit it
        guesses = [
            guess_line(c.name, target.target, key, c.rule)
            for c in target.licensing.components
            for key in c.guessed
        ]
        # a recipe's drop glob that drops nothing: said on every build
        idle = [w for staged in target.runtimes for w in staged.closure.idle_drops]
        targets.append(
            {
                "target": target.target,
                "files": len(files),
                "bytes": sum(f.size for f in files),
                "runtimes": runtimes,
                "requires": requirement_groups(requirements.externals),
                "runs_on": requirements.runs_on,
                "warnings": [*requirements.warnings, *idle, *guesses],
                # what no package can depend on (a kernel driver): only where a plugin says so
                **({"system": system} if (system := _system_lines(result, target)) else {}),
            }
        )
    signed = result.signed_by is not None
    return {
        "schema": SUMMARY_SCHEMA,
        "product": product.name,
        "version": product.version,
        "tool_version": __version__,
        "release": release,
        "up_to_date": False,
        "plan": {
            "targets": list(result.plan.targets),
            "runtimes": list(product.runtimes),
            "channels": list(product.channels),
            # the project's replacements of built-in templates, as the build key covers them
            "templates": [
                {"template": o.name, "file": o.shown, "sha256": o.sha256}
                for o in result.plan.templates.items
            ],
        },
        "artifacts": {
            "total": len(result.artifacts),
            "downloaded": downloaded,
            "cached": len(result.artifacts) - downloaded,
            "repaired": [
                {
                    "entry": str(r.path),
                    "expected": r.expected,
                    "found": r.found,
                    "size": r.size,
                    "stored_size": r.stored_size,
                    "action": f"{r.action}; fetched again",
                }
                for r in result.repairs
            ],
        },
        "phases": [
            {"name": p.name, "seconds": round(p.seconds, 3), "detail": p.detail} for p in phases
        ],
        "memory": memory_peaks(),
        "targets": targets,
        "packages": [_package(p, result.version_dir, release) for p in result.packages],
        "audit": audit_groups(result.audits),
        "signature": {
            "signed": signed,
            "key_id": result.signed_by,
            "manifest": MANIFEST_NAME,
            "signature": SIGNATURE_NAME if signed else None,
        },
        "paths": {
            "version_dir": str(result.version_dir),
            "manifest": MANIFEST_NAME,
            "sbom": SBOM_NAME,
            "packaging": "packaging",
            "summary": SUMMARY_NAME,
        },
    }


def _system_lines(result: BuildResult, target: TargetResult) -> list[str]:
    """The system requirements the target's plugin EPs state ([component] device)."""
    recipes = [result.plan.recipes.get(staged.runtime) for staged in target.runtimes]
    return sorted({r.device.requirement() for r in recipes if r is not None and r.device})


def requirement_groups(externals: Iterable[ExternalLibrary]) -> list[dict[str, Any]]:
    """Per external group: what the user's machine must (or may) provide, and how to get it."""
    return [
        {
            "group": g.group,
            "kind": g.kind,
            "optional": g.optional,
            "version": g.version,
            "install": g.install,
            "sandbox": g.sandbox,
            "note": g.note,
            "names": list(g.names),
            "via": sorted({e.via for e in g.libraries}),
        }
        for g in groups_of(externals)
    ]


def _package(package: ChannelOutput, version_dir: Path, release: bool) -> dict[str, Any]:
    """A channel's files where they were published (the channel wrote them in the scratch copy
    of the version directory, which then took its place), how long its packager took per
    target, and a development build's faster compression where a release's differs."""

    directory = version_dir / "packaging" / package.channel
    files = []
    for written in package.files:
        path = directory / written.relative_to(package.directory)
        if path.is_file():
            files.append(
                {
                    "path": _relative(path, version_dir),
                    "bytes": path.stat().st_size,
                    # each target's package has its own size (two installers are two sizes)
                    "target": package_target(
                        package.channel, path.relative_to(directory).as_posix()
                    ),
                }
            )
    return {
        "channel": package.channel,
        "targets": list(CHANNEL_TARGETS.get(package.channel, ())),
        "directory": _relative(directory, version_dir),
        "files": files,
        "bytes": sum(f["bytes"] for f in files),
        "notes": list(package.notes),
        "times": [{"target": t.target, "seconds": round(t.seconds, 3)} for t in package.times],
        "compression": None if release else development_compression(package.channel),
    }


def _relative(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:  # a package written beside the version directory
        return str(path)


def audit_groups(audits: Sequence[ChannelAudit]) -> list[dict[str, Any]]:
    """The audit verdicts; channels whose verdict is the same (same targets, same rows, same
    waivers) are one entry, so a target's licence table is never told twice."""
    groups: dict[str, dict[str, Any]] = {}
    for audit in audits:
        components = [
            {"name": c.name, "version": c.version, "license": c.expression, "status": c.status}
            for c in audit.components
        ]
        waived = [
            {
                "component": c.name,
                "file": u.waiver.file,
                "license": u.waiver.license,
                "signed_off": u.signed_off,
            }
            for c in audit.waived
            for u in c.waiver_uses
        ]
        entry = {
            "targets": list(audit.targets),
            "passed": audit.passed,
            "headline": audit.headline,
            "awaiting": list(audit.awaiting),
            "release": audit.release,
            "components": components,
            "waived": waived,
            "review": [
                f"{c.name}: {p}" for c in audit.components if c.status == "review" for p in c.said
            ],
            "unused_waivers": [w.file for w in audit.unused_waivers],
            "failures": list(audit.failures),
        }
        key = json.dumps(entry, sort_keys=True)
        groups.setdefault(key, {"channels": [], **entry})["channels"].append(audit.channel)
    return list(groups.values())


def write_summary(result: BuildResult, phases: Sequence[Phase], *, release: bool) -> None:
    """build-summary.json beside the manifest, written atomically."""

    document = summary_document(result, phases, release=release)
    atomic_write(result.version_dir / SUMMARY_NAME, summary_json(document))


def size_table(result: BuildResult) -> Table:
    """Per target and runtime: what was kept, and what was dropped and why."""
    from rich.table import Table

    table = Table(title=f"{result.plan.product.name} {result.plan.product.version}")
    columns = ("target", "runtime", "kept", "MiB", "dropped", "MiB dropped", "why dropped")
    for column in columns:
        table.add_column(column, justify="right" if column in ("kept", "MiB") else "left")
    for target in result.targets:
        for staged in target.runtimes:
            kept = staged.closure.kept
            dropped = staged.closure.dropped
            reasons = Counter(_reason_bucket(d.reason) for d in dropped)
            why = "; ".join(f"{reason} ×{count}" for reason, count in sorted(reasons.items()))
            table.add_row(
                target.target,
                staged.runtime,
                str(len(kept)),
                mib_figure(sum(k.size for k in kept)),
                str(len(dropped)),
                mib_figure(sum(d.size for d in dropped)),
                why,
            )
    return table


def externals_lines(result: BuildResult) -> list[str]:
    """`-v`: every library each target needs from the system, by group (the model's)."""
    lines = []
    for target in result.targets:
        groups = sorted(target.requirements.groups, key=lambda g: g.group)
        summary = "; ".join(
            f"{g.group} ({g.kind}{', optional' if g.optional else ''}): {_compact(list(g.names))}"
            for g in groups
        )
        lines.append(f"{target.target} needs from the system: {summary}")
    return lines


@dataclass(frozen=True)
class TargetResult:
    target: str
    stage: Path
    runtimes: tuple[StagedRuntime, ...]
    texts: tuple[StagedText, ...]
    licensing: TargetLicensing
    files: tuple[ShippedFile, ...]  # every entry of the stage, as the packages must carry it
    requirements: TargetRequirements  # what the user's machine must provide: every output's


@dataclass(frozen=True)
class BuildResult:
    plan: Plan
    artifacts: dict[str, Artifact]
    targets: tuple[TargetResult, ...]
    audits: tuple[ChannelAudit, ...]
    version_dir: Path
    packages: tuple[ChannelOutput, ...] = ()
    signed_by: str | None = None  # key id, None for an unsigned development build
    up_to_date: dict[str, Any] | None = None  # set when nothing changed: the earlier summary
    repairs: tuple[Repair, ...] = ()  # cache entries that failed their hash, fetched again
    warnings: tuple[str, ...] = ()  # what the build warns about, as the console prints it


def _compact(names: list[str]) -> str:
    """Name every library except the Windows API sets, which are counted."""
    api_sets = [n for n in names if n.lower().startswith(("api-ms-win-", "ext-ms-win-"))]
    shown = [n for n in names if n not in api_sets]
    if api_sets:
        shown.append(f"{len(api_sets)} API sets (api-ms-win-*)")
    return ", ".join(shown)
