"""`pin()` itself: resolve, confirm (download through the cache), rewrite, compare, write."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from packaging.utils import canonicalize_name

from ortbundle._core.errors import IntegrityError
from ortbundle._core.progress import Reporter
from ortbundle.config.plan import Project
from ortbundle.config.recipes import load_recipe
from ortbundle.config.sources import PypiCoordinates, Source
from ortbundle.fetch.artifacts import Fetcher
from ortbundle.fetch.cache import Cache, default_cache_dir
from ortbundle.fetch.nested import renest
from ortbundle.tools.pin.compare import BumpReport, bump_report
from ortbundle.tools.pin.lookups import Lookups, download_new, lookups
from ortbundle.tools.pin.options import PinOptions, names_of, project_of, version_of
from ortbundle.tools.pin.rewrite import Edit, SourceMove, rewrite_recipe, validate, write_atomically
from ortbundle.tools.pin.select import choose_published, selection
from ortbundle.tools.pin.wheels import Chosen, choose_wheels, tags_note


@dataclass(frozen=True)
class NotMoved:
    source: str
    project: str
    version: str
    reason: str


@dataclass(frozen=True)
class PinResult:
    component: str
    recipe: Path
    version: str  # the release the moved sources are pinned to now (or would be)
    moves: tuple[SourceMove, ...]  # empty: already pinned there
    not_moved: tuple[NotMoved, ...]
    edits: tuple[Edit, ...]
    notes: tuple[str, ...]
    report: BumpReport | None  # None with --no-build, or when nothing moved
    written: bool

    @property
    def refused(self) -> bool:
        """The new pin does not build, so the recipe was left as it was."""
        return bool(self.moves) and not self.written

    @property
    def exit_code(self) -> int:
        return (self.report.exit_code if self.report else 1) if self.refused else 0

    def lines(self) -> list[str]:
        out = [f"{self.component}: pinned to {self.version} ({self.recipe})"]
        if not self.moves:
            out[0] = f"{self.component}: already pinned to {self.version}; nothing to do"
        for m in self.moves:
            out.append(
                f"  {m.source}: {m.old_filename} → {m.new_filename} "
                f"(sha256 {m.sha256[:16]}…, {m.size:,} B)"
            )
            if m.tags_note:
                out.append(f"    {m.tags_note}")
            out += [f"    nested {n.member}: sha256 {n.sha256[:16]}…" for n in m.nested]
        for n in self.not_moved:
            out.append(f"  not moved: {n.source} ({n.project} {n.version}): {n.reason}")
        # the sources' own edits are the moves above; to_json() lists every edit
        out += [
            f"  edit {e.field}: {e.old} → {e.new}"
            for e in self.edits
            if not e.field.startswith("sources.")
        ]
        out += [f"  note: {n}" for n in self.notes]
        if self.report is not None:
            out += self.report.lines()
        if self.refused:
            out.append(
                f"{self.recipe.name} NOT rewritten: the new pin does not build "
                "(--force pins it anyway)"
            )
        elif self.written:
            out.append(f"{self.recipe.name} rewritten")
        return out

    def to_json(self) -> str:
        data = asdict(replace(self, report=None))
        data["recipe"] = str(self.recipe)
        data["report"] = asdict(self.report) if self.report else None
        data["refused"] = self.refused
        return json.dumps(data, indent=2)


def pin(project: Project, component: str, options: PinOptions, reporter: Reporter) -> PinResult:
    """Resolve, confirm, compare and rewrite; the recipe changes only if every step succeeded."""
    path = project.recipes / f"{component}.toml"
    recipe = load_recipe(path)
    original = path.read_bytes()
    moved, others, main = selection(recipe, options.sources)
    main_ids = {s.id for s in recipe.sources.values() if canonicalize_name(project_of(s)) == main}
    not_moved = tuple(
        NotMoved(
            s.id,
            project_of(s),
            version_of(s.origin),
            f"another project; move it with `invoke pin {component} --source {s.id}`"
            if canonicalize_name(project_of(s)) != main
            else "not named by --source",
        )
        for s in others
    )
    moves: tuple[SourceMove, ...]
    with lookups(options, project.root) as ask:
        if moved[0].origin.kind == "pypi":
            version, chosen, notes = choose_wheels(moved, options, component, ask)
            if all(c.filename == s.filename and c.sha256 == s.sha256 and s.size for s, c in chosen):
                return PinResult(component, path, version, (), not_moved, (), notes, None, False)
            moves = _confirm(chosen, version, options, component, reporter, ask)
        else:
            version, notes = choose_published(moved, options, component, ask)
            if all(version_of(s.origin) == version and s.size for s in moved):
                return PinResult(component, path, version, (), not_moved, (), notes, None, False)
            moves = _confirm_published(project, moved, version, options, component, reporter, ask)
    old_text = original.decode("utf-8")
    all_main = main_ids <= {m.source for m in moves}
    new_text, edits, rewrite_notes = rewrite_recipe(old_text, moves, main, all_main)
    validate(project, component, new_text, moves)
    report = (
        bump_report(project, component, old_text, new_text, options, reporter)
        if options.build
        else None
    )
    write = report is None or report.ok or options.force
    if write:
        write_atomically(path, new_text, original)
    return PinResult(
        component, path, version, moves, not_moved, edits, notes + rewrite_notes, report, write
    )


def _confirm(
    chosen: Sequence[tuple[Source, Chosen]],
    version: str,
    options: PinOptions,
    component: str,
    reporter: Reporter,
    ask: Lookups,
) -> tuple[SourceMove, ...]:
    """Download each new file through the cache, which refuses bytes that miss the digest."""
    cache = Cache(options.cache_dir or default_cache_dir())
    fetcher = Fetcher(cache, reporter, policy=options.retry, registries=ask.registries)
    pinned = [
        Source(s.id, PypiCoordinates(s.pypi.project, version, c.filename), c.sha256, c.size)
        for s, c in chosen
    ]
    artifacts = fetcher.fetch_all(
        ((component, p) for p in pinned), jobs=options.jobs or os.cpu_count() or 1
    )
    return tuple(
        SourceMove(
            s.id,
            s.pypi.project,
            s.pypi.version,
            s.filename,
            version,
            c.filename,
            c.sha256,
            artifacts[c.sha256].size,
            tags_note(s.filename, c.listed),
        )
        for s, c in chosen
    )


def _confirm_published(
    project: Project,
    moved: Sequence[Source],
    version: str,
    options: PinOptions,
    component: str,
    reporter: Reporter,
    ask: Lookups,
) -> tuple[SourceMove, ...]:
    """Download each new file (its registry's published digests vouching for it) into the
    cache, then re-pin the archives inside it."""
    cache = Cache(options.cache_dir or default_cache_dir())
    fetcher = Fetcher(cache, reporter, policy=options.retry, registries=ask.registries)
    moves = []
    for s in moved:
        origin = replace(s.origin, version=version)  # type: ignore[arg-type]
        sha256 = download_new(s, origin, cache, reporter, ask)
        if version == version_of(s.origin) and sha256 != s.sha256:
            raise IntegrityError(
                f"source {s.id}: the registry serves {origin.describe()} with sha256 {sha256}, "
                f"but the recipe pins {s.sha256} for that same version",
                component=component,
                file=origin.filename,
                fix="find out which is right; pin does not re-pin a release that changed",
            )
        # from the cache, where download_new put it: the fetcher's own check of the bytes
        artifact = fetcher.fetch(Source(s.id, origin, sha256, None, s.hold), component=component)
        nested = renest(cache, artifact.path, s, origin.filename, component)
        moves.append(
            SourceMove(
                s.id,
                project_of(s),
                version_of(s.origin),
                s.filename,
                version,
                origin.filename,
                sha256,
                artifact.size,
                None,
                origin.kind,
                nested,
                names_of(s.origin),
            )
        )
    return tuple(moves)
