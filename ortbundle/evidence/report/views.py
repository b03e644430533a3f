"""What report.html shows, as plain frozen dataclasses: the collector fills them from the
build's evidence, the template only reads them."""

from __future__ import annotations

from dataclasses import dataclass

from ortbundle.licensing.audit import ChannelAudit


@dataclass(frozen=True)
class Box:
    """One rectangle of a treemap (SVG user units), a file or a group of them."""

    x: float
    y: float
    w: float
    h: float
    label: str
    title: str  # the tooltip: what it is, its size
    size: int
    kind: str  # "target" | "runtime" | "component" | "file"
    runtime: str
    component: str
    color: str


@dataclass(frozen=True)
class Segment:
    """One runtime's share of a package's bar."""

    x: float
    w: float
    group: str
    size: int
    color: str


@dataclass(frozen=True)
class PackageView:
    """The packages that carry the same targets (a channel's output; or a stage no package
    carries), as one picture: they carry the same files."""

    names: tuple[str, ...]  # ("arch", "flatpak", "deb", "rpm"), ("nsis",), ("stage windows-arm64",)
    targets: tuple[str, ...]
    size: int  # bytes of the files it carries (symlinks not counted)
    files: int
    width: float  # the treemap's SVG size; its area stands for `size`
    height: float
    boxes: tuple[Box, ...]
    segments: tuple[Segment, ...]  # the overview bar, on the scale shared by every package
    artifacts: tuple[tuple[str, int], ...]  # what the channel wrote: (path, bytes)


@dataclass(frozen=True)
class AuditView:
    """Channels whose audits are the same (same targets, same rows) are shown once."""

    channels: tuple[str, ...]
    audit: ChannelAudit


@dataclass(frozen=True)
class Kept:
    name: str
    size: int
    why: str


@dataclass(frozen=True)
class Drop:
    member: str
    size: int
    reason: str


@dataclass(frozen=True)
class ExternalName:
    name: str
    needed_by: tuple[str, ...]
    via: str  # "needed" (DT_NEEDED, import table), "delay" (first use) or "loads" (by name)


@dataclass(frozen=True)
class ExternalGroupView:
    group: str
    kind: str
    optional: bool | None  # None: the build's data does not say
    version: str
    install: str
    note: str
    sandbox: bool | None
    names: tuple[ExternalName, ...]


@dataclass(frozen=True)
class ClosureView:
    target: str
    runtime: str
    directory: str
    entry: str
    kept: tuple[Kept, ...]
    links: tuple[tuple[str, str], ...]
    dropped: tuple[Drop, ...]
    not_libraries: int  # archive members the recipe's globs did not take
    externals: tuple[ExternalGroupView, ...]
    runs_on: str = ""  # the oldest system it runs on, from the requirements model


@dataclass(frozen=True)
class RequirementsView:
    """What one target's package needs of the user's machine, as the requirements model says."""

    target: str
    runs_on: str  # "" when nothing versioned is needed
    groups: tuple[ExternalGroupView, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class GateCheck:
    check: str  # "IR version", "opset", "inputs", …
    wanted: str
    found: str


@dataclass(frozen=True)
class FormView:
    name: str
    canonical: bool
    derived_from: str
    size: int
    sha256: str
    backends: tuple[str, ...]
    gate: tuple[GateCheck, ...]


@dataclass(frozen=True)
class ModelView:
    name: str
    label: str
    version: str
    license: str
    targets: tuple[str, ...]
    forms: tuple[FormView, ...]


@dataclass(frozen=True)
class FileChange:
    path: str
    old: int | None  # bytes; None when added
    new: int | None  # None when removed


@dataclass(frozen=True)
class SizeChange:
    what: str  # a target or a package
    old: int | None
    new: int | None


@dataclass(frozen=True)
class LicenceChange:
    component: str
    old: str | None
    new: str | None


@dataclass(frozen=True)
class ExternalChange:
    target: str
    added: tuple[str, ...]  # "libz.so.1 (zlib)"
    removed: tuple[str, ...]


@dataclass(frozen=True)
class Changes:
    """What changed since an earlier build of the product, from its written evidence."""

    against: str  # "fakeproduct 1.2.2"
    source: str  # where it was read: "dist/…/1.2.2" or the --compare path given
    sizes: tuple[SizeChange, ...]
    added: tuple[FileChange, ...]
    removed: tuple[FileChange, ...]
    changed: tuple[FileChange, ...]
    licences: tuple[LicenceChange, ...]
    externals: tuple[ExternalChange, ...]
    notes: tuple[str, ...]  # what could not be compared, and why
    unverified: str | None = None  # why the earlier build failed verification: nothing shown


@dataclass(frozen=True)
class Report:
    product: str
    version: str
    description: str
    signed_by: str | None
    targets: tuple[str, ...]
    packages: tuple[PackageView, ...]
    audits: tuple[AuditView, ...]
    closures: tuple[ClosureView, ...]
    models: tuple[ModelView, ...]
    changes: Changes | None
    scale: float  # the overview bars: SVG units per byte
    requirements: tuple[RequirementsView, ...] = ()  # per target, from its closure record
