"""Licences, per file: attribute every staged file, validate the expressions, write NOTICE.

Archive metadata is not evidence (the Linux OpenVINO wheel says "MIT" and ships Apache-2.0
libraries), so every file in a target stage is mapped to exactly one component by the recipe's
[[licenses]] globs. A file no rule claims, or two rules claim, stops the build here, before
anything is published. What each runtime file says of itself (its version resource, its
notices, the code it carries; ortbundle/stage/file_facts.py) and which staged notices name
it are kept with it, for the audit to compare with the claim (licensing/file_findings.py).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any

from ortbundle._core.errors import LicenseError
from ortbundle._core.memo import NO_MEMO, Memo
from ortbundle._core.overrides import NO_OVERRIDES, Overrides
from ortbundle._core.templating import render
from ortbundle.config.project import TOOL_COMPONENT
from ortbundle.config.recipes import Confirmation, LicenseRule, Recipe, generic_purl
from ortbundle.config.sources import Source, source_from_json, source_to_json
from ortbundle.fetch.cache import stat_record
from ortbundle.licensing.file_findings import (
    Mention,
    ShippedEvidence,
    named_terms,
    search_terms,
    shipped_evidence_from_json,
    shipped_evidence_to_json,
)
from ortbundle.licensing.spdx import NotAnExpression, facts
from ortbundle.stage.file_facts import Embedded
from ortbundle.stage.models import StagedModel
from ortbundle.stage.staging import StagedFile, StagedRuntime, StagedText
from ortbundle.stage.versions import FileFacts, read_file_facts, resolve_found

TOOL_EXPRESSION = "MIT"
NOTICE_NAME = "NOTICE"
_LICENSE_REF = re.compile(r"^LicenseRef-[A-Za-z0-9.-]+$")
_COPYRIGHT = re.compile(
    r"^\W{0,4}(copyright\s*(\(c\)|©)|copyright\s+(\d{4}|the\b)|©\s*\d{4}|\(c\)\s*\d{4})",
    re.IGNORECASE,
)


def normalize_expression(
    expression: str, *, where: str, memo: Memo = NO_MEMO
) -> tuple[str, tuple[str, ...]]:
    """Validate an SPDX expression; return it normalised and its licence ids (sorted).

    `LicenseRef-…` ids stand for terms SPDX does not list (a vendor EULA, unknown terms).
    `memo`: the build's, where the expression's facts are kept (spdx.facts).
    """
    try:
        parsed = facts(expression, memo)
    except NotAnExpression as exc:
        if str(exc) == "empty licence expression":
            raise LicenseError(
                "empty licence expression", file=where, fix="write an SPDX expression"
            ) from None
        raise LicenseError(
            f"{expression!r} is not a licence expression: {exc}",
            file=where,
            fix="write an SPDX expression, e.g. 'MIT AND BSD-3-Clause'",
        ) from None
    unknown = [s for s in parsed.invalid if not _LICENSE_REF.match(s)]
    if unknown:
        raise LicenseError(
            f"unknown licence id(s) {', '.join(unknown)} in {expression!r}",
            file=where,
            fix="use SPDX ids (spdx.org/licenses) or LicenseRef-<name> for other terms",
        )
    return parsed.normalized, parsed.ids


@dataclass(frozen=True)
class ComponentUse:
    """One licensed component as it ships on one target."""

    name: str
    version: str
    expression: str  # normalised SPDX expression
    license_ids: tuple[str, ...]
    purl: str
    files: tuple[StagedFile, ...]  # what it contributes (libraries, links, metadata)
    texts: tuple[StagedText, ...]  # its licence texts in the stage
    copyrights: tuple[str, ...]  # copyright lines found in its texts
    sources: tuple[Source, ...]  # the upstream artifacts its files came from
    publisher: str = ""  # who made it, as its files say (PE CompanyName); "" when they do not
    # what its own files say of themselves, and what its rule says of the claim
    evidence: tuple[ShippedEvidence, ...] = ()  # per file it ships (links aside)
    licensor: tuple[str, ...] = ()  # its rule's `licensor`
    guessed: tuple[str, ...] = ()  # its rule's keys the scaffold guessed
    confirmed: Confirmation | None = None  # a person's sign-off of the claim
    rule: str = ""  # where its rule is: "recipes/<name>.toml"

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files if f.link_to is None)

    @property
    def has_text(self) -> bool:
        return bool(self.texts)

    @property
    def embedded(self) -> tuple[EmbeddedUse, ...]:
        """Third-party code its files carry, per file, with the notices that name it."""
        return tuple(
            EmbeddedUse(e.path, code, e.named_by(*code.terms))
            for e in self.evidence
            for code in e.evidence.embedded
        )


@dataclass(frozen=True)
class EmbeddedUse:
    """One component's code inside one shipped file (libpng in libonnxruntime-genai.so), as
    NOTICE names it."""

    path: str  # target-relative
    code: Embedded
    named_by: tuple[str, ...]  # the staged notices that name it; () when none does


@dataclass(frozen=True)
class TargetLicensing:
    target: str
    components: tuple[ComponentUse, ...]  # sorted by name

    @property
    def license_ids(self) -> tuple[str, ...]:
        return tuple(sorted({i for c in self.components for i in c.license_ids}))

    def owner(self, path: str) -> ComponentUse:
        for component in self.components:
            if any(f.path == path for f in component.files) or any(
                t.path == path for t in component.texts
            ):
                return component
        raise KeyError(path)


def purl_for(rule: LicenseRule, sources: Iterable[Source], version: str | None = None) -> str:
    """The rule's own purl, else pypi when its files come from that very project, else generic."""
    if rule.purl:
        return rule.purl
    origins = {s.origin for s in sources}
    if len(origins) == 1:
        (origin,) = origins
        if origin.name == rule.component:
            return origin.purl()
    return generic_purl(rule.component, version or rule.version)


def copyright_lines(data: bytes) -> tuple[str, ...]:
    """Copyright statements in a licence text, in order, once each; none from a binary document."""
    if b"\0" in data[:8192] or data.startswith(b"%PDF"):
        return ()  # a binary document (the Qualcomm PDF) ships as it is; nothing to quote
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("cp1252", errors="replace")  # older vendor texts are Latin-1
    seen: dict[str, None] = {}
    for line in text.splitlines():
        stripped = " ".join(line.split())
        if _COPYRIGHT.match(stripped) and "[yyyy]" not in stripped.lower():
            seen.setdefault(stripped[:300], None)
    return tuple(seen)


def attribute_target(
    target: str,
    stage: Path,
    runtimes: Iterable[tuple[Recipe, StagedRuntime]],
    texts: Iterable[StagedText],
    tool_files: Iterable[StagedFile],
    tool_texts: Iterable[StagedText],
    tool_version: str,
    models: Iterable[StagedModel] = (),
    *,
    memo: Memo,
) -> TargetLicensing:
    """Map every staged file to exactly one component; a file left over or claimed twice fails.

    `memo`: the build's, where each DLL's version resource and each licence text's copyright
    lines are kept (by SHA-256), and each licence expression's facts; off, they are read
    again (a release)."""
    target_stage = _Stage(target, stage, tuple(texts), memo)
    collected = _collect_runtime_files(target, runtimes)
    components = [
        _runtime_component(name, found, target_stage) for name, found in sorted(collected.items())
    ]
    components += [_model_component(model, set(collected), target_stage) for model in models]
    _refuse_unowned_texts(target_stage, set(collected) | {c.name for c in components})
    components.append(_tool_component(target_stage, tool_files, tool_texts, tool_version))
    return TargetLicensing(
        target=target, components=tuple(sorted(components, key=lambda c: c.name))
    )


@dataclass(frozen=True)
class _Stage:
    """The target stage being attributed: where it is, its licence texts, and the memos its
    file versions and copyright lines are kept in (None: read again, a release)."""

    target: str
    path: Path
    texts: tuple[StagedText, ...]
    memo: Memo  # the build's: version resources, copyright lines, expression facts

    def texts_of(self, component: str) -> tuple[StagedText, ...]:
        return tuple(sorted((t for t in self.texts if t.component == component), key=_by_path))

    def copyrights(self, texts: Iterable[StagedText]) -> tuple[str, ...]:
        return _copyrights(self.path, texts, self.memo)

    def mentions(self, terms: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """Each term, with the target's staged notices that name it (every text of every
        component: the archive's ThirdPartyNotices may be staged for another rule)."""
        wanted = tuple(sorted(set(terms)))
        named: dict[str, list[str]] = {t: [] for t in wanted}
        for text in sorted(self.texts, key=_by_path):
            for term in _text_names(self.path / text.path, text.sha256, wanted, self.memo):
                named[term].append(text.path)
        return {t: tuple(paths) for t, paths in named.items()}


@dataclass
class _Collected:
    """One runtime component's files as attribution finds them, and the sources they came from."""

    rule: LicenseRule
    recipe: Recipe
    files: list[StagedFile] = field(default_factory=list)
    sources: dict[str, Source] = field(default_factory=dict)  # by archive SHA-256


def _collect_runtime_files(
    target: str, runtimes: Iterable[tuple[Recipe, StagedRuntime]]
) -> dict[str, _Collected]:
    """Each runtime's staged files, in order, under the component of the one rule claiming each."""
    collected: dict[str, _Collected] = {}
    for recipe, staged in runtimes:
        rules = recipe.for_target(target).licenses
        kept_source = {k.name: k.source for k in staged.closure.kept}
        prefix = staged.directory + "/"
        for f in staged.files:
            relative = f.path.removeprefix(prefix)
            rule = _claiming_rule(f, relative, rules, recipe, target)
            found = collected.setdefault(rule.component, _Collected(rule, recipe))
            _refuse_redeclared(found.rule, rule, recipe, target)
            found.files.append(f)
            source_id = kept_source.get(f.link_to or relative)
            if source_id is not None:
                source = recipe.sources[source_id]
                found.sources[source.sha256] = source
    return collected


def _claiming_rule(
    f: StagedFile, relative: str, rules: tuple[LicenseRule, ...], recipe: Recipe, target: str
) -> LicenseRule:
    """The one [[licenses]] rule whose globs match the file (its path in the runtime, or its
    bare name: a payload under assets/ matches by file name too); none or several is refused."""
    base = relative.rsplit("/", 1)[-1]
    matching = [
        r
        for r in rules
        if any(fnmatch.fnmatchcase(relative, g) or fnmatch.fnmatchcase(base, g) for g in r.files)
    ]
    if not matching:
        raise LicenseError(
            f"staged file {f.path} has no licence attribution",
            component=recipe.name,
            target=target,
            file=str(recipe.path),
            fix=f"add a [[targets.{target}.licenses]] rule whose files match {relative!r}",
        )
    if len(matching) > 1:
        raise LicenseError(
            f"staged file {f.path} is claimed by components "
            f"{', '.join(r.component for r in matching)}",
            component=recipe.name,
            target=target,
            file=str(recipe.path),
            fix="narrow the [[licenses]] file globs so each file matches one rule",
        )
    return matching[0]


def _refuse_redeclared(first: LicenseRule, rule: LicenseRule, recipe: Recipe, target: str) -> None:
    """A component is one version under one licence, whichever rule or runtime names it."""
    if (first.version, first.expression) != (rule.version, rule.expression):
        raise LicenseError(
            f"component {rule.component} is declared as {first.version} "
            f"({first.expression}) and as {rule.version} ({rule.expression})",
            component=recipe.name,
            target=target,
            file=str(recipe.path),
            fix="one component, one version and licence: rename one of them",
        )


def _runtime_component(name: str, found: _Collected, target_stage: _Stage) -> ComponentUse:
    """A runtime component with its licence checked, its texts and copyright lines, what each
    of its files says of itself, and the version (and publisher) its files show when it came
    bundled in another's archive."""
    rule = found.rule
    expression, ids = normalize_expression(
        rule.expression,
        where=f"{found.recipe.path} ({name} on {target_stage.target})",
        memo=target_stage.memo,
    )
    own_texts = target_stage.texts_of(name)
    sources = tuple(found.sources.values())
    # each file read once (or taken from the memo): its version and its evidence
    read = {
        f.path: read_file_facts(
            target_stage.path / f.path, f.path, sha256=f.sha256, memo=target_stage.memo
        )
        for f in sorted(found.files, key=_by_path)
        if f.link_to is None
    }
    version, publisher = _version_and_publisher(name, found, sources, target_stage, read)
    purl = purl_for(rule, sources, version)
    if version != rule.version and "@" not in purl:  # the files' version, for the SBOM too
        purl = f"{purl}@{version}"
    return ComponentUse(
        name=name,
        version=version,
        expression=expression,
        license_ids=ids,
        purl=purl,
        files=tuple(sorted(found.files, key=_by_path)),
        texts=own_texts,
        copyrights=target_stage.copyrights(own_texts),
        sources=tuple(sorted(sources, key=lambda s: s.filename)),
        publisher=publisher,
        evidence=_evidence(found, read, target_stage),
        licensor=rule.licensor,
        guessed=rule.guessed,
        confirmed=rule.confirmed,
        rule=f"recipes/{found.recipe.path.name}",
    )


def _version_and_publisher(
    name: str,
    found: _Collected,
    sources: tuple[Source, ...],
    target_stage: _Stage,
    read: dict[str, FileFacts],
) -> tuple[str, str]:
    """The package a registry publishes states its own version; a component bundled inside
    another's archive is checked against (or takes its version from) its files."""
    if any(s.origin.name == name for s in sources):
        return found.rule.version, ""
    resolved = resolve_found(
        name,
        found.rule.version,
        [facts.version for facts in read.values() if facts.version is not None],
        target=target_stage.target,
        recipe=str(found.recipe.path),
    )
    return resolved.version, resolved.publisher


def _evidence(
    found: _Collected, read: dict[str, FileFacts], target_stage: _Stage
) -> tuple[ShippedEvidence, ...]:
    """Each file's evidence, with the staged notices that name it, its product or the code it
    carries."""
    sha = {f.path: f.sha256 for f in found.files}
    terms = {path: search_terms(path, facts.evidence) for path, facts in read.items()}
    named = target_stage.mentions(t for ts in terms.values() for t in ts)
    return tuple(
        ShippedEvidence(
            path,
            sha[path],
            facts.evidence,
            tuple(Mention(t, named[t]) for t in terms[path]),
        )
        for path, facts in read.items()
    )


def _model_component(
    model: StagedModel, runtime_names: set[str], target_stage: _Stage
) -> ComponentUse:
    """A model as its recipe declares it; it may not take a runtime component's name."""
    model_recipe = model.recipe
    if model_recipe.name in runtime_names:
        raise LicenseError(
            f"model {model_recipe.name} has the name of a runtime component",
            target=target_stage.target,
            file=str(model_recipe.path),
            fix="give the model recipe a name of its own",
        )
    expression, ids = normalize_expression(
        model_recipe.expression, where=str(model_recipe.path), memo=target_stage.memo
    )
    own_texts = target_stage.texts_of(model_recipe.name)
    used = {f.form.source for f in model.forms}
    return ComponentUse(
        name=model_recipe.name,
        version=model_recipe.version,
        expression=expression,
        license_ids=ids,
        purl=model.purl,
        files=model.files,
        texts=own_texts,
        copyrights=target_stage.copyrights(own_texts),
        sources=tuple(sorted((model_recipe.sources[s] for s in used), key=lambda s: s.filename)),
    )


def _refuse_unowned_texts(target_stage: _Stage, owners: set[str]) -> None:
    """A licence text staged for a component that ships no file on this target is a stale rule."""
    unowned = sorted({t.component for t in target_stage.texts} - owners)
    if unowned:
        raise LicenseError(
            f"licence texts staged for {', '.join(unowned)}, which ship no file here",
            target=target_stage.target,
            fix="drop the unused [[licenses]] rule for this target or fix its file globs",
        )


def _tool_component(
    target_stage: _Stage,
    tool_files: Iterable[StagedFile],
    tool_texts: Iterable[StagedText],
    tool_version: str,
) -> ComponentUse:
    """This tool's own files (the loader, runtimes.json, NOTICE) under its own licence."""
    texts = tuple(sorted(tool_texts, key=_by_path))
    expression, ids = normalize_expression(
        TOOL_EXPRESSION, where="ortbundle", memo=target_stage.memo
    )
    return ComponentUse(
        name=TOOL_COMPONENT,
        version=tool_version,
        expression=expression,
        license_ids=ids,
        purl=generic_purl(TOOL_COMPONENT, tool_version),
        files=tuple(sorted(tool_files, key=_by_path)),
        texts=texts,
        copyrights=target_stage.copyrights(texts),
        sources=(),
    )


def _by_path(item: StagedFile | StagedText) -> str:
    return item.path


def _copyrights(stage: Path, texts: Iterable[StagedText], memo: Memo) -> tuple[str, ...]:
    lines: dict[str, None] = {}
    for text in texts:
        for line in _text_copyrights(stage / text.path, text.sha256, memo):
            lines.setdefault(line, None)
    return tuple(lines)


def _text_copyrights(path: Path, sha256: str, memo: Memo) -> tuple[str, ...]:
    """copyright_lines of one staged text (whose SHA-256 the stage checked as it copied it),
    kept by that SHA-256 and the tool's code: every target of a build quotes the same texts,
    and a warm build quotes them again, line by line, for nothing."""
    return memo.remembered(
        "copyrights",
        [sha256],  # and the tool's code
        lambda: copyright_lines(path.read_bytes()),
        list,
        lambda kept: tuple(str(line) for line in kept),
    )


def _text_names(path: Path, sha256: str, terms: tuple[str, ...], memo: Memo) -> tuple[str, ...]:
    """Which of `terms` one staged notice names, kept by its SHA-256 and the terms (and the
    tool's code): a warm build reads no notice again."""
    return memo.remembered(
        "notice-names",
        [sha256, *terms],
        lambda: named_terms(_notice(path.read_bytes()), terms),
        list,
        lambda kept: tuple(str(term) for term in kept),
    )


def _notice(data: bytes) -> str:
    if b"\0" in data[:8192] or data.startswith(b"%PDF"):
        return ""  # a binary document is quoted by nobody, searched by nobody
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def notice_text(
    product: str,
    version: str,
    licensing: TargetLicensing,
    *,
    memo: Memo,
    overrides: Overrides = NO_OVERRIDES,
) -> str:
    """The NOTICE file: every component, its licence, copyright lines and where its texts sit
    (its rendering kept under the build's `memo`; the project's NOTICE.j2 if it brings one)."""
    text = render(
        "NOTICE.j2",
        {
            "product": product,
            "version": version,
            "target": licensing.target,
            "licensing": licensing,
        },
        memo=memo,
        overrides=overrides,
    )
    _refuse_incomplete_notice(text, licensing, overrides)
    return text


def _refuse_incomplete_notice(text: str, licensing: TargetLicensing, overrides: Overrides) -> None:
    """A NOTICE is the attribution the licences ask for: a project's own NOTICE.j2 may word it
    as it likes, but it must still name every component, its licence and where each of its
    texts sits (a replacement that drops a loop would otherwise ship unattributed code)."""
    omitted = [
        f"{c.name} ({', '.join(missing)})"
        for c in licensing.components
        if (
            missing := [
                f"{what} {value!r}"
                for what, value in (
                    ("name", c.name),
                    ("licence", c.expression),
                    *(("text", t.path) for t in c.texts),
                )
                if value not in text
            ]
        )
    ]
    if not omitted:
        return
    override = overrides.get("NOTICE.j2")
    raise LicenseError(
        f"the NOTICE for {licensing.target} leaves out what its licences require it to say: "
        + "; ".join(omitted),
        target=licensing.target,
        file=override.shown if override else "NOTICE.j2 (built in)",
        fix="render each component of licensing.components with its name, expression and "
        "every text's path, as the built-in template does (invoke templates --copy NOTICE.j2 "
        "shows it)",
    )


def with_tool_file(licensing: TargetLicensing, file: StagedFile) -> TargetLicensing:
    """Add a file written after attribution (NOTICE, which cannot describe itself)."""
    components = tuple(
        replace(c, files=tuple(sorted((*c.files, file), key=_by_path)))
        if c.name == TOOL_COMPONENT
        else c
        for c in licensing.components
    )
    return replace(licensing, components=components)


def list_stage(stage: Path, licensing: TargetLicensing) -> tuple[ShippedFile, ...]:
    """Every entry on disk, as packages must carry it; an entry nobody is attributed stops here.

    Hashes come from the attribution (computed while extracting), so nothing is read twice;
    sizes are checked against the disk.
    """
    known = {f.path: f for c in licensing.components for f in c.files}
    known.update(
        {
            t.path: StagedFile(t.path, t.size, t.sha256)
            for c in licensing.components
            for t in c.texts
        }
    )
    shipped: list[ShippedFile] = []
    for path in sorted(stage.rglob("*")):
        if path.is_dir() and not path.is_symlink():
            continue
        relative = path.relative_to(stage).as_posix()
        entry = known.get(relative)
        if entry is None:
            raise LicenseError(
                f"{relative} is in the stage but attributed to no component",
                target=licensing.target,
                file=str(path),
                fix="every staged file needs a [[licenses]] rule; remove the stray file",
            )
        if path.is_symlink():
            shipped.append(
                ShippedFile(
                    relative, entry.size, entry.sha256, 0o777, link_to=path.readlink().as_posix()
                )
            )
            continue
        stat = path.stat()
        if stat.st_size != entry.size:
            raise LicenseError(
                f"{relative} changed size after it was attributed",
                target=licensing.target,
                file=str(path),
                fix="rebuild; nothing may write into a stage after attribution",
            )
        shipped.append(
            ShippedFile(
                relative, entry.size, entry.sha256, stat.st_mode & 0o777, stamp=stat_record(stat)
            )
        )
    missing = sorted(set(known) - {f.path for f in shipped})
    if missing:
        raise LicenseError(
            f"attributed files are missing from the stage: {', '.join(missing)}",
            target=licensing.target,
            fix="rebuild the stage",
        )
    return tuple(shipped)


RECORD_SCHEMA = "ortbundle.target-record/1"


def licensing_to_json(licensing: TargetLicensing) -> str:
    """A target's attribution as data, so a release can merge targets built on other machines."""
    document = {
        "schema": RECORD_SCHEMA,
        "target": licensing.target,
        "components": [
            {
                "name": c.name,
                "version": c.version,
                "expression": c.expression,
                "license_ids": list(c.license_ids),
                "purl": c.purl,
                "files": [
                    {"path": f.path, "size": f.size, "sha256": f.sha256, "link_to": f.link_to}
                    for f in c.files
                ],
                "texts": [
                    {
                        "component": t.component,
                        "path": t.path,
                        "origin": t.origin,
                        "size": t.size,
                        "sha256": t.sha256,
                    }
                    for t in c.texts
                ],
                "copyrights": list(c.copyrights),
                "sources": [source_to_json(s) for s in c.sources],
                **({"publisher": c.publisher} if c.publisher else {}),
                **_claim_to_json(c),
            }
            for c in licensing.components
        ],
    }
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def licensing_from_json(text: str, *, where: str) -> TargetLicensing:
    try:
        document = json.loads(text)
        if document.get("schema") != RECORD_SCHEMA:
            raise ValueError(f"schema is {document.get('schema')!r}, not {RECORD_SCHEMA}")
        components = tuple(
            ComponentUse(
                name=c["name"],
                version=c["version"],
                expression=c["expression"],
                license_ids=tuple(c["license_ids"]),
                purl=c["purl"],
                files=tuple(StagedFile(**f) for f in c["files"]),
                texts=tuple(StagedText(**t) for t in c["texts"]),
                copyrights=tuple(c["copyrights"]),
                sources=tuple(source_from_json(s) for s in c["sources"]),
                publisher=c.get("publisher", ""),
                evidence=tuple(shipped_evidence_from_json(e) for e in c.get("evidence", [])),
                licensor=tuple(c.get("licensor", [])),
                guessed=tuple(c.get("guessed", [])),
                confirmed=_confirmation_from_json(c.get("confirmed")),
                rule=c.get("rule", ""),
            )
            for c in document["components"]
        )
        return TargetLicensing(target=document["target"], components=components)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise LicenseError(
            f"not a readable target record: {exc}",
            file=where,
            fix="use the dist/ tree written by invoke build of this ortbundle version",
        ) from None


def _claim_to_json(c: ComponentUse) -> dict[str, Any]:
    """The evidence and what the rule says of the claim, in a target record: a release merged
    from runners audits them as the build did."""
    confirmed = c.confirmed
    return {
        "evidence": [shipped_evidence_to_json(e) for e in c.evidence],
        "licensor": list(c.licensor),
        "guessed": list(c.guessed),
        "confirmed": None
        if confirmed is None
        else {
            "reviewer": confirmed.reviewer,
            "reason": confirmed.reason,
            "sha256": list(confirmed.sha256),
            "reviewed": confirmed.reviewed.isoformat() if confirmed.reviewed else None,
            "expires": confirmed.expires.isoformat() if confirmed.expires else None,
        },
        "rule": c.rule,
    }


def _confirmation_from_json(data: Any) -> Confirmation | None:
    if data is None:
        return None
    return Confirmation(
        reviewer=data["reviewer"],
        reason=data["reason"],
        sha256=tuple(data["sha256"]),
        reviewed=date.fromisoformat(data["reviewed"]) if data["reviewed"] else None,
        expires=date.fromisoformat(data["expires"]) if data["expires"] else None,
    )


@dataclass(frozen=True)
class ShippedFile:
    """One entry of a target stage, as it must appear in every package."""

    path: str  # relative to the stage root, POSIX separators
    size: int
    sha256: str  # of the content (for a symlink: of the file it points to)
    mode: int  # 0o644 or 0o755
    link_to: str | None = None  # symlink target, relative to the link's own directory
    # its stat record (fetch.cache.stat_record: size, mtime, ctime, inode) when the build
    # listed the stage: a file that still has it is what the build hashed, and is not read
    # again by every channel
    stamp: Mapping[str, int] | None = field(default=None, compare=False, repr=False)
