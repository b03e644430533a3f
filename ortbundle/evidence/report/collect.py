"""Gather what report.html shows from the build's evidence: the licence attribution (every
staged file with its component), the audits, the closure records, models.json and the packaging
directory. A single build and a release merged from runners hold the same evidence, so they
write the same report."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ortbundle.config.model_recipes import ModelRecipe
from ortbundle.config.vocabulary import CHANNEL_TARGETS, SHARED_PACKAGE_CHANNELS, package_target
from ortbundle.evidence.report.closures import read_closures, read_requirements
from ortbundle.evidence.report.treemap import Node, group, layout
from ortbundle.evidence.report.views import (
    AuditView,
    Box,
    ClosureView,
    Drop,
    ExternalGroupView,
    ExternalName,
    FormView,
    GateCheck,
    Kept,
    ModelView,
    PackageView,
    RequirementsView,
    Segment,
)
from ortbundle.licensing.attribution import TargetLicensing
from ortbundle.licensing.audit import ChannelAudit
from ortbundle.stage.models import MODELS_INDEX

MAP_WIDTH = 960.0
MAP_HEIGHT = 360.0
BAR_WIDTH = 780.0
SHARED = "shared"  # the loader, runtimes.json, NOTICE, licence texts: not one runtime's
_HUES = (210, 25, 130, 280, 50, 175, 330, 95, 0, 240)


def mib(size: int) -> str:
    """The one unit of the report (and of the console): MiB, or KiB/B below one MiB."""
    if size >= 1 << 20:
        return f"{size / (1 << 20):.1f} MiB"
    if size >= 1 << 10:
        return f"{size / (1 << 10):.1f} KiB"
    return f"{size} B"


def area_group(path: str) -> str:
    """Which runtime (or model) a stage path belongs to, for the pictures."""
    parts = path.split("/")
    if len(parts) > 2 and parts[0] == "runtimes":
        return parts[1]
    if len(parts) > 2 and parts[0] == "models":
        return f"model {parts[1]}"
    if len(parts) > 2 and parts[0] == "plugins":
        return f"plugin {parts[1]}"
    return SHARED


def _colors(groups: Sequence[str]) -> dict[str, int]:
    return {g: _HUES[i % len(_HUES)] for i, g in enumerate(sorted(set(groups)))}


def _color(hue: int, shade: int) -> str:
    return f"hsl({hue},55%,{42 + 8 * (shade % 4)}%)"


def _target_node(tl: TargetLicensing) -> Node:
    """runtime → component → file, for the regular files of one target's stage."""
    by_group: dict[str, dict[str, list[Node]]] = {}
    for c in tl.components:
        entries = [(f.path, f.size) for f in c.files if f.link_to is None]
        entries += [(t.path, t.size) for t in c.texts]
        for path, size in entries:
            g = area_group(path)
            by_group.setdefault(g, {}).setdefault(c.name, []).append(
                Node(f"{tl.target}/{path}", size, "file", runtime=g, component=c.name)
            )
    runtimes = [
        group(
            g,
            "runtime",
            [
                group(name, "component", files, runtime=g, component=name)
                for name, files in cs.items()
            ],
            runtime=g,
        )
        for g, cs in by_group.items()
    ]
    return group(tl.target, "target", runtimes)


def _boxes(
    root: Node, hues: Mapping[str, int], licences: Mapping[tuple[str, str], str]
) -> tuple[Box, ...]:
    shades: dict[tuple[str, str], int] = {}
    boxes = []
    for node, (x, y, w, h) in layout(root, (0.0, 0.0, MAP_WIDTH, MAP_HEIGHT)):
        shade = shades.setdefault(
            (node.runtime, node.component),
            sum(1 for r, _ in shades if r == node.runtime),
        )
        where = node.label if node.kind == "file" else f"{node.kind} {node.label}"
        licence = licences.get((node.label.split("/", 1)[0], node.component), "")
        detail = f" — {node.component} ({licence})" if node.kind == "file" and licence else ""
        boxes.append(
            Box(
                x=round(x, 3),
                y=round(y, 3),
                w=round(w, 3),
                h=round(h, 3),
                label=node.label.rsplit("/", 1)[-1],
                title=f"{where} — {node.size:,} B ({mib(node.size)}){detail}",
                size=node.size,
                kind=node.kind,
                runtime=node.runtime,
                component=node.component,
                color=_color(hues.get(node.runtime, 0), shade),
            )
        )
    return tuple(boxes)


def packages(
    version_dir: Path, channels: Sequence[str], licensing: Sequence[TargetLicensing]
) -> tuple[tuple[PackageView, ...], float]:
    """Every package, then every built target no package carries (its stage); the packages
    carrying the same targets share one treemap. A channel that makes one package per target
    (two installers, an x86-64 and an aarch64 .deb) is one package per target here, named with
    its target when it has several: each bar is the bytes of one package that exists, never a
    sum across architectures (issue #43). Also the bytes-to-width scale of the overview bars."""
    by_target = {tl.target: tl for tl in licensing}
    carriers: dict[tuple[str, ...], list[str]] = {}
    owners: dict[str, tuple[str, str | None]] = {}  # package name -> (channel, its target)
    for channel in channels:
        targets = tuple(t for t in CHANNEL_TARGETS.get(channel, ()) if t in by_target)
        if not targets:
            continue
        if channel in SHARED_PACKAGE_CHANNELS:
            carriers.setdefault(targets, []).append(channel)
            owners[channel] = (channel, None)
            continue
        for target in targets:
            name = f"{channel} {target}" if len(targets) > 1 else channel
            carriers.setdefault((target,), []).append(name)
            owners[name] = (channel, target)
    carried = {t for ts in carriers for t in ts}
    for t in by_target:
        if t not in carried:
            carriers[(t,)] = [f"stage {t}"]
    nodes = {t: _target_node(tl) for t, tl in by_target.items()}
    hues = _colors([r.label for n in nodes.values() for r in n.children])
    licences = {(tl.target, c.name): c.expression for tl in licensing for c in tl.components}
    roots = {ts: group(" ".join(ts), "package", [nodes[t] for t in ts]) for ts in carriers}
    largest = max((r.size for r in roots.values()), default=0)
    scale = BAR_WIDTH / largest if largest else 0.0
    views = []
    for targets, names in carriers.items():
        root = roots[targets]
        # one level down for a single-target package: runtimes are its top-level boxes
        top = root.children[0] if len(root.children) == 1 else root
        totals: dict[str, int] = {}
        for target_node in root.children:
            for runtime in target_node.children:
                totals[runtime.label] = totals.get(runtime.label, 0) + runtime.size
        segments, left = [], 0.0
        for g, size in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])):
            segments.append(
                Segment(round(left, 3), round(size * scale, 3), g, size, _color(hues[g], 0))
            )
            left += size * scale
        artifacts = tuple(
            (p.relative_to(version_dir).as_posix(), p.lstat().st_size)
            for name in names
            if name in owners
            for channel, target in [owners[name]]
            for p in sorted((version_dir / "packaging" / channel).rglob("*"))
            if p.is_file() and not p.is_symlink()
            if package_target(
                channel, p.relative_to(version_dir / "packaging" / channel).as_posix()
            )
            == target
        )
        views.append(
            PackageView(
                names=tuple(names),
                targets=targets,
                size=root.size,
                files=sum(
                    1
                    for t in targets
                    for c in by_target[t].components
                    for f in (*c.files, *c.texts)
                    if getattr(f, "link_to", None) is None
                ),
                width=MAP_WIDTH,
                height=MAP_HEIGHT,
                boxes=_boxes(top, hues, licences),
                segments=tuple(segments),
                artifacts=artifacts,
            )
        )
    return tuple(views), scale


def audit_views(audits: Sequence[ChannelAudit]) -> tuple[AuditView, ...]:
    """One view per distinct audit: channels over the same targets with the same rows share it."""

    def key(a: ChannelAudit) -> str:
        rows = [
            (
                c.name,
                c.version,
                c.expression,
                c.files,
                c.texts,
                c.verdict,
                c.status,
                [p.replace(f"the {a.channel} channel", "the channel") for p in c.problems],
                [repr(u) for u in c.waiver_uses],
            )
            for c in a.components
        ]
        return repr((a.targets, a.release, a.passed, rows, a.unused_waivers))

    grouped: dict[str, list[ChannelAudit]] = {}
    for a in audits:
        grouped.setdefault(key(a), []).append(a)
    return tuple(AuditView(tuple(a.channel for a in same), same[0]) for same in grouped.values())


def _external_groups(items: Sequence[Mapping[str, Any]]) -> tuple[ExternalGroupView, ...]:
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for item in items:
        grouped.setdefault(str(item.get("group", "")), []).append(item)
    views = []
    for name, members in sorted(grouped.items()):
        first = members[0]
        flags = [m.get("optional") for m in members]
        sandbox = first.get("sandbox")
        views.append(
            ExternalGroupView(
                group=name,
                kind=str(first.get("kind", "")),
                # the model's rule (stage/requirements.py): one required library makes its
                # group required; None where an older record does not say
                optional=all(flags) if all(isinstance(f, bool) for f in flags) else None,
                version=str(first.get("version", "")),
                install=str(first.get("install", "")),
                note=str(first.get("note", "")),
                sandbox=sandbox if isinstance(sandbox, bool) else None,
                names=tuple(
                    ExternalName(
                        str(m.get("name", "")),
                        tuple(str(n) for n in m.get("needed_by", [])),
                        str(m.get("via", "needed")),
                    )
                    for m in sorted(members, key=lambda m: str(m.get("name", "")).lower())
                ),
            )
        )
    return tuple(views)


def requirements(version_dir: Path, targets: Sequence[str]) -> tuple[RequirementsView, ...]:
    """Per target, the requirements model its closure record carries (none for an older one)."""
    views = []
    for target in targets:
        model = read_requirements(version_dir, target)
        if model is None:
            continue
        views.append(
            RequirementsView(
                target=target,
                runs_on=str(model.get("runs_on", "")),
                groups=_external_groups(model.get("externals", [])),
                warnings=tuple(
                    str(w) for r in model.get("runtimes", []) for w in r.get("warnings", [])
                ),
            )
        )
    return tuple(views)


def closures(version_dir: Path, targets: Sequence[str]) -> tuple[ClosureView, ...]:
    views = []
    for target in targets:
        record = read_closures(version_dir, target)
        model = (record or {}).get("requirements") or {}
        runs_on = {r["name"]: str(r.get("runs_on", "")) for r in model.get("runtimes", [])}
        for r in record["runtimes"] if record else []:
            views.append(
                ClosureView(
                    target=target,
                    runtime=r["runtime"],
                    directory=r["directory"],
                    entry=r["entry"],
                    kept=tuple(Kept(k["name"], k["size"], k["why"]) for k in r["kept"]),
                    links=tuple((a, b) for a, b in r["links"]),
                    dropped=tuple(
                        Drop(f"{d['source']}:{d['member']}", d["size"], d["reason"])
                        for d in r["dropped"]
                    ),
                    not_libraries=r["outside_globs"],
                    externals=_external_groups(r["externals"]),
                    runs_on=runs_on.get(r["runtime"], ""),
                )
            )
    return tuple(views)


def _io(specs: Sequence[Any]) -> str:
    def one(spec: Any) -> str:
        name = spec["name"] if isinstance(spec, Mapping) else spec.name
        kind = spec.get("type") if isinstance(spec, Mapping) else spec.type
        shape = spec.get("shape") if isinstance(spec, Mapping) else spec.shape
        text = str(name)
        if kind:
            text += f": {kind}"
        if shape is not None:
            text += f" [{', '.join(str(d) for d in shape)}]"
        return text

    return "; ".join(one(s) for s in specs) or "none"


def _gate(form: Any, found: Mapping[str, Any]) -> tuple[GateCheck, ...]:
    gate = form.gate
    opsets = found.get("opsets", {})
    checks = [
        GateCheck(
            "IR version",
            f"≥ {gate.min_ir_version}" if gate.min_ir_version is not None else "any",
            str(found.get("ir_version", "?")),
        ),
        GateCheck(
            "opset",
            f"ai.onnx ≥ {gate.min_opset}" if gate.min_opset is not None else "any",
            ", ".join(f"{d} {v}" for d, v in sorted(opsets.items()))
            if isinstance(opsets, Mapping)
            else "?",
        ),
    ]
    for role in ("inputs", "outputs"):
        wanted = getattr(gate, role)
        checks.append(
            GateCheck(role, "any" if wanted is None else _io(wanted), _io(found.get(role, [])))
        )
    metadata = found.get("metadata", {})
    for key, value in gate.metadata:
        checks.append(
            GateCheck(
                f"metadata {key}",
                "present" if value is None else value,
                str(metadata.get(key, "absent")) if isinstance(metadata, Mapping) else "?",
            )
        )
    return tuple(checks)


def models(
    version_dir: Path, recipes: Mapping[str, ModelRecipe], targets: Sequence[str]
) -> tuple[ModelView, ...]:
    """Every model of the product, its forms and each form's gate beside what the file says."""
    indexes: dict[str, dict[str, Any]] = {}
    for target in targets:
        try:
            document = json.loads((version_dir / target / MODELS_INDEX).read_text("utf-8"))
        except (OSError, ValueError):
            continue
        for model in document.get("models", []):
            indexes.setdefault(model["name"], {})[target] = model
    views = []
    for name, recipe in sorted(recipes.items()):
        staged = indexes.get(name, {})
        forms_found: dict[str, Mapping[str, Any]] = {}
        for entry in staged.values():
            for form in entry.get("forms", []):
                forms_found.setdefault(form["name"], form)
        views.append(
            ModelView(
                name=name,
                label=recipe.label,
                version=recipe.version,
                license=recipe.expression,
                targets=tuple(sorted(staged)),
                forms=tuple(
                    FormView(
                        name=form.name,
                        canonical=form.canonical,
                        derived_from=form.derived_from or "",
                        size=int(forms_found.get(form.name, {}).get("size", 0)),
                        sha256=form.sha256,
                        backends=form.backends,
                        gate=_gate(form, forms_found.get(form.name, {})),
                    )
                    for form in recipe.forms
                ),
            )
        )
    return tuple(views)
