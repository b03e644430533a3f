"""What a finished build says: one summary, as a JSON document and as lines for a person.

`summary_document` turns a `BuildResult` into the facts (schema: data/build-summary.schema.json),
`write_summary` stores them as dist/<product>/<version>/build-summary.json (outside the signed
manifest: it holds timings), and `summary_lines` renders any such document — fresh, or read back
by a no-op build — as wrapped plain text. Nothing here imports rich or the pipeline at import
time: a no-op build prints its summary from the JSON alone. The detail tables of `--verbose`
(`size_table`, `externals_lines`) import rich when called.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.table import Table

    from ortbundle._core.progress import Phase
    from ortbundle.channels import ExternalLibrary
    from ortbundle.config.plan import BuildOptions
    from ortbundle.licensing.audit import ChannelAudit
    from ortbundle.pipeline.build import BuildResult

SUMMARY_NAME = "build-summary.json"
SUMMARY_SCHEMA = "ortbundle.build-summary/1"
_OTHER = "not a library"  # the members a runtime's archive has besides libraries: counted apart
MIB = 1 << 20


def _mib(size: int) -> str:
    return f"{size / MIB:.1f}"


def _reason_bucket(reason: str) -> str:
    return "alias" if reason.startswith("alias of ") else reason


# --- the document ---------------------------------------------------------------------------


def summary_document(
    result: BuildResult, phases: Sequence[Phase], options: BuildOptions
) -> dict[str, Any]:
    """The facts of a finished build, as build-summary.json carries them."""
    from ortbundle._core.version import __version__
    from ortbundle.evidence.record import MANIFEST_NAME, SBOM_NAME, SIGNATURE_NAME
    from ortbundle.stage.system import runtime_system, violations

    product = result.plan.product
    downloaded = sum(1 for a in result.artifacts.values() if a.downloaded)
    targets = []
    for target in result.targets:
        files = [f for f in target.files if f.link_to is None]
        runtimes = []
        warnings = []
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
                }
            )
            warnings += [
                f"{staged.runtime} {problem}"
                for problem in violations(product.system, runtime_system(staged))
            ]
        externals = result.requirements.get(target.target) or _closure_externals(target)
        targets.append(
            {
                "target": target.target,
                "files": len(files),
                "bytes": sum(f.size for f in files),
                "runtimes": runtimes,
                "requires": requirement_groups(externals),
                "runs_on": _runs_on(target.runtimes),
                "warnings": warnings,
            }
        )
    signed = result.signed_by is not None
    return {
        "schema": SUMMARY_SCHEMA,
        "product": product.name,
        "version": product.version,
        "tool_version": __version__,
        "release": options.release,
        "up_to_date": False,
        "plan": {
            "targets": list(result.plan.targets),
            "runtimes": list(product.runtimes),
            "channels": list(product.channels),
        },
        "artifacts": {
            "total": len(result.artifacts),
            "downloaded": downloaded,
            "cached": len(result.artifacts) - downloaded,
        },
        "phases": [
            {"name": p.name, "seconds": round(p.seconds, 3), "detail": p.detail} for p in phases
        ],
        "targets": targets,
        "packages": [_package(p, result.version_dir) for p in result.packages],
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


def _runs_on(runtimes: Sequence[Any]) -> str:
    """The oldest system the target's binaries run on ("" when nothing is versioned)."""
    from ortbundle.stage.system import package_system

    system = package_system(runtimes)
    keys = ("glibc", "gcc", "opencl", "windows", "msvc", "android_api")
    return system.describe() if any(getattr(system, k) for k in keys) else ""


def _closure_externals(target: Any) -> list[ExternalLibrary]:
    """No package was made (a strict audit failed): the closure's own findings."""
    from ortbundle.channels import ExternalLibrary

    return [
        ExternalLibrary(e.name, e.group, e.kind, e.note, e.needed_by)
        for staged in target.runtimes
        for e in staged.closure.externals
    ]


def requirement_groups(externals: Iterable[ExternalLibrary]) -> list[dict[str, Any]]:
    """Per external group: what the user's machine must (or may) provide, and how to get it."""
    groups: dict[str, dict[str, Any]] = {}
    for ext in externals:
        group = groups.setdefault(
            ext.group,
            {
                "group": ext.group,
                "kind": ext.kind,
                "optional": ext.optional,
                "version": ext.version,
                "install": ext.install,
                "sandbox": ext.sandbox,
                "note": ext.note,
                "names": set(),
                "via": set(),
            },
        )
        group["optional"] = group["optional"] and ext.optional  # one required name: required
        group["names"].add(ext.name)
        group["via"].add(ext.via)
    return [
        {
            **g,
            "names": sorted(g["names"], key=str.lower),
            "via": sorted(g["via"]),
        }
        for g in sorted(groups.values(), key=lambda g: (g["optional"], g["group"]))
    ]


def _package(package: Any, version_dir: Path) -> dict[str, Any]:
    """A channel's files where they were published (the channel wrote them in the scratch copy
    of the version directory, which then took its place)."""
    from ortbundle.config.vocabulary import CHANNEL_TARGETS

    directory = version_dir / "packaging" / package.channel
    files = []
    for written in package.files:
        path = directory / written.relative_to(package.directory)
        if path.is_file():
            files.append({"path": _relative(path, version_dir), "bytes": path.stat().st_size})
    return {
        "channel": package.channel,
        "targets": list(CHANNEL_TARGETS.get(package.channel, ())),
        "directory": _relative(directory, version_dir),
        "files": files,
        "bytes": sum(f["bytes"] for f in files),
        "notes": list(package.notes),
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
            "release": audit.release,
            "components": components,
            "waived": waived,
            "review": [
                f"{c.name}: {p}"
                for c in audit.components
                if c.status == "review"
                for p in c.problems
            ],
            "unused_waivers": [w.file for w in audit.unused_waivers],
            "failures": list(audit.failures),
        }
        key = json.dumps(entry, sort_keys=True)
        groups.setdefault(key, {"channels": [], **entry})["channels"].append(audit.channel)
    return list(groups.values())


def write_summary(result: BuildResult, phases: Sequence[Phase], options: BuildOptions) -> None:
    """build-summary.json beside the manifest, written atomically."""
    from ortbundle._core.fsio import atomic_write

    document = summary_document(result, phases, options)
    atomic_write(result.version_dir / SUMMARY_NAME, summary_json(document))


def summary_json(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def read_summary(version_dir: Path) -> dict[str, Any] | None:
    """The summary an earlier build wrote, or None (an older build, or it was removed)."""
    try:
        document = json.loads((version_dir / SUMMARY_NAME).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("schema") != SUMMARY_SCHEMA:
        return None
    return document


# --- the lines a person reads ---------------------------------------------------------------


def plan_line(
    product: str,
    version: str,
    targets: Sequence[str],
    runtimes: Sequence[str],
    channels: Sequence[str],
    cached: int,
    total: int,
) -> str:
    """The first thing a build says: what it is about to make, and what it already has. More
    than three targets are counted (the summary names each)."""
    have = "all cached" if cached == total else f"{cached} cached, {total - cached} to download"
    where = ", ".join(targets) if len(targets) <= 3 else f"{len(targets)} targets"
    return (
        f"{product} {version}: {where}; runtimes {', '.join(runtimes)}; "
        f"channels {', '.join(channels) or 'none'}; {total} downloads, {have}"
    )


def summary_lines(document: Mapping[str, Any], *, short: bool = False) -> list[str]:
    """The end-of-build summary (unwrapped); `short` is the no-op build's: verdicts and places."""
    lines: list[str] = []
    audits = document["audit"]
    built = [t["target"] for t in document["targets"]]
    placed: set[int] = set()
    told: list[str] = []  # the requirement lines just printed: a next target with the same
    for target in document["targets"]:  # ones (the Android ABIs) shares them
        name = target["target"]
        if not short:
            sizes = ", ".join(f"{r['name']} {_mib(r['bytes'])}" for r in target["runtimes"])
            header = f"{name}: {target['files']} files, {_mib(target['bytes'])} MiB ({sizes} MiB)"
            requirements = _requirement_lines(target)
            if requirements == told and lines[-len(told) :] == told:
                lines[-len(told) : -len(told)] = [header]
            else:
                lines += [header, *requirements]
            told = requirements
            # a package of several targets (the Android module) is told under its last one
            mine = [p for p in document["packages"] if _home(p["targets"], built) == name]
            if mine:
                lines.append(
                    "  " + " · ".join(f"{p['channel']} {_mib(p['bytes'])} MiB" for p in mine)
                )
        for index, audit in enumerate(audits):
            if index not in placed and _home(audit["targets"], built) == name:
                placed.add(index)
                lines += _audit_lines(audit)
    for index, audit in enumerate(audits):  # an audit of no built target (cannot happen today)
        if index not in placed:
            lines += _audit_lines(audit)
    signature = document["signature"]
    if signature["signed"]:
        lines.append(
            f"signed: {signature['manifest']} by key {signature['key_id']} "
            f"({signature['signature']})"
        )
    else:
        lines.append(
            f"UNSIGNED development build: {signature['manifest']} has no signature (invoke keygen)"
        )
    paths = document["paths"]
    lines.append(
        f"output: {_shown(paths['version_dir'])}/ ({paths['packaging']}/<channel>/, "
        f"{paths['manifest']}, {paths['sbom']}, {paths['summary']})"
    )
    return lines


def _shown(path: str) -> str:
    """A path as the user typed it: relative to where they are, when it is below."""
    try:
        return Path(path).relative_to(Path.cwd()).as_posix()
    except ValueError:
        return path


def _home(targets: Sequence[str], built: Sequence[str]) -> str | None:
    """The last built target of a package or an audit: where the summary tells it."""
    mine = [t for t in built if t in targets]
    return mine[-1] if mine else None


def _requirement_lines(target: Mapping[str, Any]) -> list[str]:
    required = [g for g in target["requires"] if not g["optional"]]
    optional = [g for g in target["requires"] if g["optional"]]

    def named(group: Mapping[str, Any]) -> str:
        return f"{group['group']} {group['version']}".strip()

    needs = "needs " + (", ".join(named(g) for g in required) or "nothing")
    if optional:
        needs += "; optional " + ", ".join(named(g) for g in optional)
    if target["runs_on"]:  # the manylinux tag and NT version number: in the JSON and -v
        needs += "; runs on " + re.sub(r" \([^)]*\)", "", target["runs_on"])
    lines = [f"  {needs}"]
    lines += [
        f"  {'optional' if g['optional'] else 'required'} {g['group']}: {g['install']}"
        for g in target["requires"]
        if g["install"]
    ]
    lines += [f"  WARNING: {w}" for w in target["warnings"]]
    return lines


def _audit_lines(audit: Mapping[str, Any]) -> list[str]:
    verdict = "passed" if audit["passed"] else "FAILED"
    counted = Counter(c["status"] for c in audit["components"])
    extra = "".join(f", {n} {s}" for s, n in sorted(counted.items()) if s != "ok")
    lines = [
        f"  audit {verdict}: {', '.join(audit['channels'])} "
        f"({len(audit['components'])} components{extra})"
    ]
    for w in audit["waived"]:
        state = "signed off" if w["signed_off"] else "NOT signed off"
        lines.append(f"  waived {w['component']}: {w['file']}, {state}")
    lines += [f"  REVIEW {r}" for r in audit["review"]]
    lines += [f"  FAIL {f}" for f in audit["failures"]]
    return lines


# --- the detail tables of --verbose -----------------------------------------------------------


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
                _mib(sum(k.size for k in kept)),
                str(len(dropped)),
                _mib(sum(d.size for d in dropped)),
                why,
            )
    return table


def externals_lines(result: BuildResult) -> list[str]:
    lines = []
    for target in result.targets:
        needs: dict[str, set[str]] = {}
        for staged in target.runtimes:
            for ext in staged.closure.externals:
                needs.setdefault(f"{ext.group} ({ext.kind})", set()).add(ext.name)
        summary = "; ".join(
            f"{group}: {_compact(sorted(names, key=str.lower))}"
            for group, names in sorted(needs.items())
        )
        lines.append(f"{target.target} needs from the system: {summary}")
    return lines


def _compact(names: list[str]) -> str:
    """Name every library except the Windows API sets, which are counted."""
    api_sets = [n for n in names if n.lower().startswith(("api-ms-win-", "ext-ms-win-"))]
    shown = [n for n in names if n not in api_sets]
    if api_sets:
        shown.append(f"{len(api_sets)} API sets (api-ms-win-*)")
    return ", ".join(shown)
