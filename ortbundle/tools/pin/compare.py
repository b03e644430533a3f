"""The bump report: every product using the component built twice aside, with the old recipe and
the new (audit only), and compared target by target — files, sizes, externals, licences."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ortbundle._core.errors import OrtbundleError
from ortbundle._core.fsio import atomic_write, refuse_links_out
from ortbundle._core.progress import Reporter
from ortbundle.config.plan import BuildOptions, Project
from ortbundle.config.products import load_product
from ortbundle.licensing.attribution import TargetLicensing
from ortbundle.licensing.audit import ChannelAudit
from ortbundle.pipeline.build import AuditFailed, build
from ortbundle.pipeline.result import BuildResult
from ortbundle.tools.pin.options import PinOptions

MIB = 1 << 20


@dataclass(frozen=True)
class FileChange:
    directory: str  # the runtime directory in the stage: runtimes/<name>
    name: str
    old_size: int | None
    new_size: int | None
    old_link: str | None = None  # what a symlink pointed to
    new_link: str | None = None


@dataclass(frozen=True)
class LicenceChange:
    component: str
    old: str | None  # "version (expression)", None when added
    new: str | None  # None when removed


@dataclass(frozen=True)
class TargetBump:
    target: str
    added: tuple[FileChange, ...]
    removed: tuple[FileChange, ...]
    changed: tuple[FileChange, ...]  # same name, other bytes or link target
    old_size: int  # bytes of every runtime library on the target (links not counted)
    new_size: int
    externals_added: tuple[str, ...]  # "runtimes/x: libz.so.1 (zlib, system)"
    externals_removed: tuple[str, ...]
    licences: tuple[LicenceChange, ...]

    @property
    def size_delta(self) -> int:
        return self.new_size - self.old_size

    @property
    def unchanged(self) -> bool:
        return not (
            self.added
            or self.removed
            or self.changed
            or self.externals_added
            or self.externals_removed
            or self.licences
        )


@dataclass(frozen=True)
class ProductBump:
    product: str
    targets: tuple[TargetBump, ...]
    old_error: str | None  # the previous pin did not build (no comparison for the files)
    new_error: str | None  # the new pin does not build
    new_exit_code: int  # 0 when the new build succeeded
    # waivers whose reviewed sha256 the new bytes no longer match (the old ones did): a
    # development build still relies on them, a --release refuses them
    stale_waivers: tuple[str, ...] = ()


@dataclass(frozen=True)
class BumpReport:
    component: str
    products: tuple[ProductBump, ...]

    @property
    def ok(self) -> bool:
        return all(p.new_error is None for p in self.products)

    @property
    def exit_code(self) -> int:
        return next((p.new_exit_code for p in self.products if p.new_error), 0)

    def lines(self) -> list[str]:
        if not self.products:
            return [f"no product uses {self.component}: nothing to compare"]
        out: list[str] = []
        for product in self.products:
            if product.old_error:
                out.append(
                    f"{product.product}: the previous pin did not build: {product.old_error}"
                )
            if product.new_error:
                out.append(f"{product.product}: THE NEW PIN DOES NOT BUILD: {product.new_error}")
            out += [f"{product.product}: {line}" for line in product.stale_waivers]
            for t in product.targets:
                out.append(
                    f"{product.product} {t.target}: {t.old_size:,} → {t.new_size:,} bytes "
                    f"({t.size_delta:+,} B, {t.size_delta / MIB:+.2f} MiB)"
                )
                out += [f"  + {c.directory}/{c.name} ({_new(c)})" for c in t.added]
                out += [f"  - {c.directory}/{c.name} ({_old(c)})" for c in t.removed]
                out += [f"  ~ {c.directory}/{c.name} ({_old(c)} → {_new(c)})" for c in t.changed]
                out += [f"  external + {e}" for e in t.externals_added]
                out += [f"  external - {e}" for e in t.externals_removed]
                out += [f"  licence {_licence(c)}" for c in t.licences]
                if t.unchanged:
                    out.append("  no file, external or licence changed")
        return out

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def _old(change: FileChange) -> str:
    return f"-> {change.old_link}" if change.old_link else f"{change.old_size or 0:,} B"


def _new(change: FileChange) -> str:
    return f"-> {change.new_link}" if change.new_link else f"{change.new_size or 0:,} B"


def _licence(change: LicenceChange) -> str:
    if change.old is None:
        return f"+ {change.component} {change.new}"
    if change.new is None:
        return f"- {change.component} {change.old}"
    return f"~ {change.component} {change.old} → {change.new}"


_Files = dict[tuple[str, str], tuple[int, str, str | None]]  # (dir, name) → size, sha256, link


@dataclass(frozen=True)
class _TargetState:
    files: _Files | None  # None: the build failed its audit, so only licences are known
    externals: dict[str, str] | None
    licences: dict[str, str]  # component → "version (expression)"


@dataclass(frozen=True)
class _Side:
    targets: dict[str, _TargetState]
    error: OrtbundleError | None
    stale_waivers: dict[tuple[str, str, str], str] = field(default_factory=dict)


def _stale_waivers(audits: Sequence[ChannelAudit]) -> dict[tuple[str, str, str], str]:
    """Each shipped file a waiver covers whose bytes are not the ones its sha256 says were
    reviewed, by (waiver, file, bytes), with the line that says so."""
    found: dict[tuple[str, str, str], str] = {}
    for audit in audits:
        for component in audit.waived:
            for use in component.waiver_uses:
                w = use.waiver
                where = f"{w.entry or '[[waivers]]'} ({w.file}) in manifests/{w.manifest}"
                for f in use.covered:
                    if w.sha256 and f.sha256 not in w.sha256:
                        found[(where, f"{f.target}/{f.path}", f.sha256)] = (
                            f"waiver {where} no longer matches the new bytes: "
                            f"{f.target}/{f.path} is sha256 {f.sha256}, the review was of "
                            f"{' or '.join(w.sha256)} — a --release refuses it until a person "
                            "reviews the new file and updates the waiver's sha256"
                        )
    return found


def _licences(licensing: TargetLicensing) -> dict[str, str]:
    return {c.name: f"{c.version} ({c.expression})" for c in licensing.components}


def _state(result: BuildResult) -> dict[str, _TargetState]:
    states = {}
    for target in result.targets:
        files: _Files = {}
        externals: dict[str, str] = {}
        for runtime in target.runtimes:
            for f in runtime.files:
                name = f.path.removeprefix(runtime.directory + "/")
                files[(runtime.directory, name)] = (f.size, f.sha256, f.link_to)
            for e in runtime.closure.externals:
                externals[f"{runtime.directory}: {e.name}"] = f"({e.group}, {e.kind})"
        states[target.target] = _TargetState(files, externals, _licences(target.licensing))
    return states


def _build_side(project: Project, options: BuildOptions, reporter: Reporter) -> _Side:
    try:
        result = build(project, options, reporter)
    except AuditFailed as failed:
        licences = {t.target: _TargetState(None, None, _licences(t)) for t in failed.licensing}
        return _Side(licences, failed, _stale_waivers(failed.audits))
    except OrtbundleError as exc:
        return _Side({}, exc)
    return _Side(_state(result), None, _stale_waivers(result.audits))


def _compare(product: str, targets: Sequence[str], old: _Side, new: _Side) -> ProductBump:
    bumps = []
    for name in targets:
        before, after = old.targets.get(name), new.targets.get(name)
        if before is None or after is None:
            continue
        added: list[FileChange] = []
        removed: list[FileChange] = []
        changed: list[FileChange] = []
        old_size = new_size = 0
        if before.files is not None and after.files is not None:
            for key in sorted(before.files.keys() | after.files.keys()):
                was, now = before.files.get(key), after.files.get(key)
                change = FileChange(
                    key[0],
                    key[1],
                    was[0] if was else None,
                    now[0] if now else None,
                    was[2] if was else None,
                    now[2] if now else None,
                )
                if was is None:
                    added.append(change)
                elif now is None:
                    removed.append(change)
                elif was != now:
                    changed.append(change)
            old_size = sum(v[0] for v in before.files.values() if v[2] is None)
            new_size = sum(v[0] for v in after.files.values() if v[2] is None)
        licences = [
            LicenceChange(c, before.licences.get(c), after.licences.get(c))
            for c in sorted(before.licences.keys() | after.licences.keys())
            if before.licences.get(c) != after.licences.get(c)
        ]
        bumps.append(
            TargetBump(
                name,
                tuple(added),
                tuple(removed),
                tuple(changed),
                old_size,
                new_size,
                _gained(after.externals, before.externals),
                _gained(before.externals, after.externals),
                tuple(licences),
            )
        )
    return ProductBump(
        product,
        tuple(bumps),
        _describe(old.error),
        _describe(new.error),
        new.error.exit_code if new.error else 0,
        tuple(
            line for key, line in sorted(new.stale_waivers.items()) if key not in old.stale_waivers
        ),
    )


def _gained(side: dict[str, str] | None, other: dict[str, str] | None) -> tuple[str, ...]:
    """Externals `side` needs and `other` does not (nothing when either is unknown)."""
    if side is None or other is None:
        return ()
    return tuple(f"{k} {side[k]}" for k in sorted(side.keys() - other.keys()))


def _describe(error: OrtbundleError | None) -> str | None:
    return f"{error.kind} error: {error}" if error else None


def _overlay(project: Project, component: str, text: str, root: Path) -> Project:
    """A project that differs from `project` only in one recipe's text (and in where dist is)."""
    recipes = root / "recipes"
    recipes.mkdir(parents=True)
    for recipe in project.recipes.glob("*.toml"):
        shutil.copyfile(recipe, recipes / recipe.name)
    atomic_write(recipes / f"{component}.toml", text)
    if project.manifests.exists():
        (root / "manifests").symlink_to(project.manifests.resolve(), target_is_directory=True)
    for shared in (project.licenses, project.keys):  # copied: a link out of the overlay is refused
        if shared.exists():
            refuse_links_out(shared, project.root)  # as the project's own build would
            shutil.copytree(shared, root / shared.name)
    return Project(root=root, dist=root / "dist")


def bump_report(
    project: Project,
    component: str,
    old_text: str,
    new_text: str,
    options: PinOptions,
    reporter: Reporter,
) -> BumpReport:
    """Build every product using `component` with the old and the new recipe (audit only), aside."""
    environ = dict(os.environ if options.environ is None else options.environ)
    environ["SOURCE_DATE_EPOCH"] = environ.get("SOURCE_DATE_EPOCH") or "0"  # no git in the overlay
    products = []
    with tempfile.TemporaryDirectory(prefix="ortbundle-pin-") as tmp:
        old_project = _overlay(project, component, old_text, Path(tmp) / "old")
        new_project = _overlay(project, component, new_text, Path(tmp) / "new")
        for manifest in sorted(project.manifests.glob("*.toml")):
            product = load_product(manifest)
            if component in product.runtimes:
                targets = product.runtime_targets[component]
            elif component in product.plugins or component in product.models:
                targets = product.targets  # shipped wherever the product is
            else:
                continue
            build_options = BuildOptions(
                product=product.name,
                targets=targets,
                index_url=options.index_url,
                jobs=options.jobs,
                cache_dir=options.cache_dir,
                retry=options.retry,
                audit_only=True,
                environ=environ,
            )
            old = _build_side(old_project, build_options, reporter)
            new = _build_side(new_project, build_options, reporter)
            products.append(_compare(product.name, targets, old, new))
    return BumpReport(component, tuple(products))
