"""Small inputs for the licence audit's direct tests: a channel policy, components as they ship
on a target, waivers, one channel's audit of them (tests/test_audit_verdicts.py,
tests/test_audit_report.py)."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import tomlkit

from ortbundle.config.products import Waiver
from ortbundle.config.recipes import Confirmation
from ortbundle.licensing.attribution import ComponentUse, TargetLicensing
from ortbundle.licensing.audit import ChannelAudit, ChannelPolicy, audit_channel
from ortbundle.licensing.file_findings import ShippedEvidence
from ortbundle.stage.staging import StagedFile, StagedText

TODAY = date(2026, 12, 1)
WIN, LIN, MAC = "windows-x86_64", "linux-x86_64", "macos-arm64"
A, B, C = "a" * 64, "b" * 64, "c" * 64
LIB = "runtimes/x/x.dll"

# allow MIT/Apache, review copyleft and vendor terms, refuse one vendor's, unknown reviewed
NSIS = ChannelPolicy(
    name="nsis",
    targets=("windows-*",),
    allow=("MIT", "Apache-2.0"),
    review=("GPL-*", "LicenseRef-*"),
    refuse=("LicenseRef-Bad",),
    unknown="review",
)


def staged(
    path: str = LIB, sha: str = A, size: int = 1 << 20, link: str | None = None
) -> StagedFile:
    return StagedFile(path, size, sha, link)


def use(
    name: str = "x",
    expression: str = "MIT",
    *,
    version: str = "1",
    files: tuple[StagedFile, ...] | None = None,  # default: runtimes/<name>/<name>.dll
    text: bool = True,
    evidence: tuple[ShippedEvidence, ...] = (),
    guessed: tuple[str, ...] = (),
    confirmed: Confirmation | None = None,
) -> ComponentUse:
    texts = (StagedText(name, f"licenses/{name}/LICENSE", "LICENSE", 10, B),) if text else ()
    return ComponentUse(
        name=name,
        version=version,
        expression=expression,
        license_ids=tuple(expression.split(" AND ")),
        purl=f"pkg:generic/{name}@{version}",
        files=files or (staged(f"runtimes/{name}/{name}.dll"),),
        texts=texts,
        copyrights=("Copyright (c) Microsoft Corporation",),
        sources=(),
        evidence=evidence,
        guessed=guessed,
        confirmed=confirmed,
        rule=f"recipes/{name}.toml",
    )


def waiver(**fields: Any) -> Waiver:
    values: dict[str, Any] = {
        "file": LIB,
        "license": "GPL-2.0-only",
        "reason": "terms read",
        "reviewer": "Jane Reviewer",
        "targets": (),
        "channels": (),
        "sha256": (A,),
        "reviewed": date(2026, 11, 30),
        "expires": date(2027, 5, 31),
        "entry": "waivers[0]",
        "manifest": "default.toml",
    }
    values.update(fields)
    return Waiver(**values)


def audit(
    *uses: ComponentUse | tuple[str, ComponentUse],
    waivers: tuple[Waiver, ...] = (),
    release: bool = False,
    policy: ChannelPolicy = NSIS,
) -> ChannelAudit:
    """One channel's audit of components shipped on Windows (or on the target given)."""
    by_target: dict[str, list[ComponentUse]] = {}
    for u in uses:
        target, component = u if isinstance(u, tuple) else (WIN, u)
        by_target.setdefault(target, []).append(component)
    licensing = [TargetLicensing(t, tuple(cs)) for t, cs in by_target.items()]
    return audit_channel(policy, licensing, waivers, release=release, today=TODAY)


def write_policy(path: Path, document: dict[str, Any]) -> Path:
    """A policy file, written with tomlkit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomlkit.dumps(document), "utf-8")
    return path
