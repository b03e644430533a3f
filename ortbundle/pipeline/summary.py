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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ortbundle._core.words import plural
from ortbundle.evidence.names import SUMMARY_NAME

SUMMARY_SCHEMA = "ortbundle.build-summary/1"
MIB = 1 << 20


def mib_figure(size: int) -> str:
    """A size in MiB, the unit written beside it by the caller."""
    return f"{size / MIB:.1f}"


# --- the document ---------------------------------------------------------------------------


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
        f"channels {', '.join(channels) or 'none'}; {plural(total, 'download')}, {have}"
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
            sizes = ", ".join(f"{r['name']} {mib_figure(r['bytes'])}" for r in target["runtimes"])
            header = (
                f"{name}: {target['files']} files, {mib_figure(target['bytes'])} MiB ({sizes} MiB)"
            )
            requirements = _requirement_lines(target)
            if requirements == told and lines[-len(told) :] == told:
                lines[-len(told) : -len(told)] = [header]
            else:
                lines += [header, *requirements]
            told = requirements
            mine = _packages_of(document["packages"], name, built)
            if mine:
                lines.append("  " + " · ".join(f"{c} {mib_figure(n)} MiB" for c, n in mine))
        for index, audit in enumerate(audits):
            if index not in placed and _home(audit["targets"], built) == name:
                placed.add(index)
                lines += _audit_lines(audit, document["product"])
    for index, audit in enumerate(audits):  # an audit of no built target (cannot happen today)
        if index not in placed:
            lines += _audit_lines(audit, document["product"])
    # which of the project's templates replaced built-in ones (an older summary, or a
    # document made by hand, says nothing of them)
    lines += [
        f"template {t['file']} replaced the built-in {t['template']}"
        for t in document.get("plan", {}).get("templates", [])
    ]
    faster = [
        f"{p['channel']} {p['compression']}" for p in document["packages"] if p.get("compression")
    ]
    if faster and not short:  # an older summary has no "compression": nothing to say
        # "development build, for speed: nsis /SOLID bzip2, a release: /SOLID lzma"
        lines.append("development build, for speed: " + "; ".join(faster))
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


def _packages_of(
    packages: Sequence[Mapping[str, Any]], target: str, built: Sequence[str]
) -> list[tuple[str, int]]:
    """(channel, bytes) of each package told under `target`: its own package of a channel
    that makes one per target (two installers are two sizes, never one sum), and a package of
    several targets (the Android module) under its last one. A summary written before files
    named their target tells each channel's whole directory under its last target."""
    told = []
    for p in packages:
        if p["files"] and all("target" in f for f in p["files"]):
            own = [f["bytes"] for f in p["files"] if f["target"] == target]
            if own:
                told.append((p["channel"], sum(own)))
                continue
            if any(f["target"] is not None for f in p["files"]):
                continue
        if _home(p["targets"], built) == target:
            told.append((p["channel"], p["bytes"]))
    return told


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
    lines += [
        f"  {r['name']}: offered by the core, not shipped: "
        + ", ".join(f"{o['provider']} ({o['library']})" for o in r["offered_not_shipped"])
        for r in target["runtimes"]
        if r.get("offered_not_shipped")  # a summary written before the key existed has none
    ]
    lines += [f"  WARNING: {w}" for w in target["warnings"]]
    return lines


def _audit_lines(audit: Mapping[str, Any], product: str) -> list[str]:
    # a summary written before the headline existed says passed or FAILED
    headline = audit.get("headline") or ("passed" if audit["passed"] else "FAILED")
    counted = Counter(c["status"] for c in audit["components"])
    extra = "".join(f", {n} {s}" for s, n in sorted(counted.items()) if s != "ok")
    what = (
        f"{', '.join(audit['channels'])} ({plural(len(audit['components']), 'component')}{extra})"
    )
    if headline in ("passed", "FAILED"):
        lines = [f"  audit {headline}: {what}"]
    else:  # "passes for development; …: `--release` will refuse", as report.html says it
        lines = [f"  audit {what}: {headline}"]
    for w in audit["waived"]:
        state = "signed off" if w["signed_off"] else "NOT signed off"
        lines.append(f"  waived {w['component']}: {w['file']}, {state}")
    lines += [f"  REVIEW {r}" for r in audit["review"]]
    # said on every build, -v or not: a waiver that accepts nothing is dead weight to remove
    lines += [
        f"  UNUSED WAIVER {w} matches no shipped file: remove it from manifests/{product}.toml, "
        "or correct its file glob"
        for w in audit["unused_waivers"]
    ]
    lines += [f"  FAIL {f}" for f in audit["failures"]]
    return lines


# --- the detail tables of --verbose -----------------------------------------------------------


def package_time_lines(document: Mapping[str, Any]) -> list[str]:
    """--verbose: where the package phase's time went, per channel and target, the longest
    first (the packagers run side by side: the phase lasts about as long as the longest), and
    the build's peak memory, ours beside the external tools'."""
    times = [
        (t["seconds"], p["channel"], t["target"])
        for p in document["packages"]
        for t in p.get("times", ())  # a summary written before the key existed has none
    ]
    lines = []
    if times:
        lines.append(f"package times ({len(times)} packages, longest first):")
        lines += [f"  {c} {t}: {s:.1f} s" for s, c, t in sorted(times, key=lambda x: -x[0])]
    if memory := document.get("memory"):  # absent in a summary written before it was recorded
        lines.append(
            f"peak memory: ortbundle {memory['ortbundle_peak_mib']:.0f} MiB, the largest "
            f"external tool at most {memory['tools_peak_mib']:.0f} MiB"
        )
    return lines
