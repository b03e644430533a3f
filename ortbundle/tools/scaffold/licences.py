"""The [[licenses]] rules a scaffolded recipe proposes, split by what the files say of themselves.

An archive's metadata speaks for the archive: spread over `files = ["*"]` it labelled
onnxruntime-directml's DirectML.dll MIT and NVIDIA's TensorRT-RTX DLLs Apache-2.0. So every
kept library's evidence is read (its version resource, its notices: stage/file_facts.py)
and the libraries are grouped by whose they say they are:

- the archive's own files — those whose holder its licence texts name (or that say nothing of
  themselves), beside the core library — keep the archive's declared licence and texts;
- every other holder and product gets a rule of its own, proposed as
  `LicenseRef-<Holder>-<Product>` for a person to review (the policy reviews a vendor's terms),
  versioned by its files' ProductVersion, with the archive's notices that name it as texts.

Every key the scaffold could only guess is listed in the rule's `guessed`, as data: a build
warns about each, a release refuses any, until a person checks it and removes it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from ortbundle.licensing.attribution import copyright_lines
from ortbundle.licensing.file_findings import named_terms, own_names
from ortbundle.stage.file_facts import FileEvidence, name_words, names_holder, plain_name
from ortbundle.tools.scaffold.propose import Library, Licence, ProposedRule, version_glob

_NOTICE = re.compile(
    r"(licen[cs]e|notice|copying|copyright|acknowledg|readme|third[-_ ]?party|eula|sla\b)",
    re.IGNORECASE,
)
_TEXT_SUFFIXES = ("", ".txt", ".md", ".rst", ".html", ".htm")
_LICENSE_REF = re.compile(r"LicenseRef-[A-Za-z0-9.-]+")


@dataclass(frozen=True)
class _Group:
    holder: str  # "" when the files name none
    product: str
    version: str  # their ProductVersion, when they all carry the same
    libraries: tuple[Library, ...]
    evidence: tuple[FileEvidence, ...]


def licence_component(project: str) -> str:
    """The archive's own component: the bare project, artifact or npm package name."""
    return project.rsplit(":", 1)[-1].rsplit("/", 1)[-1]


def notice_members(members: Sequence[str]) -> tuple[str, ...]:
    """The archive's text files that may name a library or its terms (licences, notices,
    acknowledgements, READMEs), besides its licence texts."""
    return tuple(
        m
        for m in sorted(members)
        if _NOTICE.search(PurePosixPath(m).name)
        and PurePosixPath(m).suffix.lower() in _TEXT_SUFFIXES
        and not m.endswith("/")
    )


def propose_rules(
    component: str,
    version: str,
    project: str,
    licence: Licence,
    kept: Sequence[Library],
    entry: Library | None,
    evidence: Callable[[Library], FileEvidence],
    read: Callable[[str], str],
    notices: Sequence[str],
) -> tuple[ProposedRule, ...]:
    """The rules for one target's kept libraries. `evidence(lib)`: what it says of itself;
    `read(member)`: an archive text ("" when too large); `notices`: the archive's notices."""
    said = {lib.staged: evidence(lib) for lib in kept}
    licence_lines = [line for t in licence.texts for line in copyright_lines(read(t).encode())]
    notice_text = {member: read(member) for member in dict.fromkeys((*licence.texts, *notices))}
    groups = _groups(kept, said)
    own = _own_group(groups, entry, licence_lines, notice_text)
    main_libs = [lib for g in groups if g in own for lib in g.libraries]
    split = [g for g in groups if g not in own]
    rules = []
    if main_libs:  # none when every library says it is another's (NVIDIA's plugin wheel)
        rules.append(
            ProposedRule(
                component=component,
                version=version,
                expression=licence.expression,
                why=licence.why,
                files=("*",) if not split else _globs(main_libs),
                files_why=_main_why(split),
                texts=licence.texts,
                guessed=(
                    *(("expression",) if licence.guessed else ()),
                    "files",
                    *(("texts",) if licence.texts else ()),
                ),
                left_out=licence.left_out,
            )
        )
    taken = {component}
    for group in split:
        rules.append(_own_rule(group, project, version, notice_text, taken))
    return tuple(rules)


def _groups(kept: Sequence[Library], said: dict[str, FileEvidence]) -> list[_Group]:
    """The kept libraries by (holder, product, product version) their evidence gives."""
    by_key: dict[tuple[str, str, str], list[Library]] = {}
    for lib in kept:
        ev = said[lib.staged]
        holder = ev.holders[0] if ev.holders else ""
        key = (" ".join(name_words(holder)), plain_name(ev.product), ev.product_version)
        by_key.setdefault(key, []).append(lib)
    groups = []
    for libs in by_key.values():
        ev = said[libs[0].staged]
        version = _numeric(ev.product_version)
        groups.append(
            _Group(
                ev.holders[0] if ev.holders else "",
                plain_name(ev.product),
                version,
                tuple(libs),
                tuple(said[lib.staged] for lib in libs),
            )
        )
    return groups


def _own_group(
    groups: list[_Group],
    entry: Library | None,
    licence_lines: list[str],
    notice_text: dict[str, str],
) -> list[_Group]:
    """The groups the archive's declared licence plausibly covers: files that say nothing of
    themselves; and, where the archive's licence texts name their holder, the entry library's
    product (whatever version each file gives) and any group that does not reserve its rights
    or that a notice names."""
    core = next(((g.holder, g.product) for g in groups if entry in g.libraries), None)
    own = []
    for g in groups:
        if not any(ev.says_anything for ev in g.evidence) or not g.holder:
            own.append(g)
            continue
        if not names_holder(g.holder, licence_lines):
            continue
        reserved = any(ev.reserved for ev in g.evidence)
        if (g.holder, g.product) == core or not reserved or _named_by(g, notice_text):
            own.append(g)
    return own


def _named_by(group: _Group, notice_text: dict[str, str]) -> tuple[str, ...]:
    """The archive's notices that name one of the group's files or its product."""
    terms = [t for lib, ev in zip(group.libraries, group.evidence, strict=True)
             for t in own_names(lib.staged, ev)]  # fmt: skip
    return tuple(m for m, text in notice_text.items() if named_terms(text, terms))


def _own_rule(
    group: _Group,
    project: str,
    version: str,
    notice_text: dict[str, str],
    taken: set[str],
) -> ProposedRule:
    """Another holder's files, as that holder's own terms for a person to review."""
    holder = _slug(group.holder, drop=()) or "Unknown"
    product = _slug(group.product, drop=name_words(group.holder)) or _slug(
        PurePosixPath(group.libraries[0].staged).stem, drop=()
    )
    component = _unique(product.lower() or holder.lower(), group.version, taken)
    texts = _named_by(group, notice_text)
    refs = sorted(
        {r for m in texts for r in _LICENSE_REF.findall(notice_text[m])}
    )  # what the notices call the terms
    quoted = "; ".join(
        f"{lib.staged} says {(ev.reserved or (ev.copyrights or (ev.company,))[0])!r}"
        for lib, ev in zip(group.libraries, group.evidence, strict=True)
    )
    named = (
        f"; {', '.join(texts)} name(s) them" if texts else "; no notice in the archive names them"
    )
    called = f" ({', '.join(texts)} say(s) {', '.join(refs)})" if refs else ""
    return ProposedRule(
        component=component,
        version=group.version or f"bundled with {project} {version}",
        expression=f"LicenseRef-{holder}-{product or 'Proprietary'}",
        why=f"guessed: {group.holder}'s own terms for {group.product or 'these files'}, not "
        f"the archive's licence{called}: read them; the policy reviews a vendor's terms",
        files=_globs(group.libraries),
        files_why=f"guessed from the files' evidence: {quoted}{named}",
        texts=texts,
        guessed=("component", "expression", "files", "texts") if texts else (
            "component", "expression", "files"),
    )  # fmt: skip


def _main_why(split: list[_Group]) -> str:
    if not split:
        return "guessed: every kept file; split the rule if the archive bundles other components"
    return (
        "guessed: the files that say nothing of themselves or whose holder the archive's "
        "licence texts name; the others say they are another's (the rules below)"
    )


def _globs(libraries: Sequence[Library]) -> tuple[str, ...]:
    """Every name a library ships under (its SONAME link too), version-free where versioned."""
    names = {version_glob(n) for lib in libraries for n in (*lib.names, lib.info.soname or "") if n}
    return tuple(sorted(names))


def _slug(text: str, *, drop: Sequence[str]) -> str:
    """A LicenseRef part from a name: its distinguishing words (at most three), case kept,
    without trademark signs, corporate suffixes, versions or the words in `drop`."""
    keep = set(name_words(text)) - set(drop)
    words = [w for w in re.split(r"[^A-Za-z0-9]+", plain_name(text)) if w]
    chosen = [
        w for w in words if name_words(w) and set(name_words(w)) <= keep and not w[0].isdigit()
    ]
    return "-".join(chosen[:3])


def _unique(name: str, version: str, taken: set[str]) -> str:
    name = re.sub(r"[^a-z0-9._+-]+", "-", name).strip("-") or "bundled"
    if name in taken:
        name = f"{name}-{version}" if version else name
    while name in taken:
        name += "-other"
    taken.add(name)
    return name


def _numeric(version: str) -> str:
    found = re.match(r"^\d+(\.\d+)*", version.strip())
    return found.group(0) if found else ""
