"""Each shipped file's own evidence against the rule that claims it.

A [[licenses]] rule claims files for a component under an expression; the files say whose they
are (ortbundle/stage/file_facts.py). The audit believes the rule only where the two agree:

- a file whose copyright holder is not the component's licensor — named neither by the
  rule's licence texts, nor by its `licensor`, nor by a `LicenseRef-<Holder>-…` it claims — is
  put to review, its evidence quoted;
- so is a file that says "All rights reserved" under a claim the policy would allow unread
  (DirectML.dll under onnxruntime-directml's MIT);
- third-party code the bytes reveal (curl, mbedtls, zlib…) is listed as such, and put to
  review when none of the rule's texts names it;
- a PE file whose version resource names a maker (CompanyName) but whose Authenticode
  signature does not back it — unsigned, broken, or signed by someone else — is put to review:
  a vendor's DLL is signed by the vendor, and one that is not may not be the vendor's.

A person who finds the claim holds says so in the rule (`confirmed`, signed off as a waiver
is); until then a release refuses the file. Guesses the scaffold left in a rule (`guessed`) are
told once per build and refused by a release.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ortbundle.stage.binaries.authenticode import UNSIGNED, VALID
from ortbundle.stage.file_facts import (
    Embedded,
    FileEvidence,
    evidence_from_json,
    evidence_to_json,
    holder_of,
    names_holder,
    plain_name,
)


@dataclass(frozen=True)
class Mention:
    """A name a file's evidence gives (its file name, its product, code it carries) and the
    target's staged notices that name it."""

    name: str
    texts: tuple[str, ...]  # target-relative paths of the notices; () when none does


@dataclass(frozen=True)
class ShippedEvidence:
    """One shipped file's evidence, as attribution found it in the stage."""

    path: str  # target-relative
    sha256: str
    evidence: FileEvidence
    mentions: tuple[Mention, ...] = ()

    def named_by(self, *names: str) -> tuple[str, ...]:
        """The notices that name any of `names`."""
        return tuple(sorted({t for m in self.mentions if m.name in names for t in m.texts}))

    @property
    def own_names(self) -> tuple[str, ...]:
        """What the file is called, by its name and by its product."""
        return own_names(self.path, self.evidence)

    @property
    def noticed_by(self) -> tuple[str, ...]:
        """The notices that name this file or its product."""
        return self.named_by(*self.own_names)


_VERSION_TAIL = re.compile(r"(\.so(\.\d+)*|\.dll|\.dylib)$", re.IGNORECASE)


def own_names(path: str, evidence: FileEvidence) -> tuple[str, ...]:
    """A file's name, its stem (DirectML.dll → DirectML; libtbb.so.12 → tbb) when it is a word
    of its own, and its product's name."""
    name = path.rsplit("/", 1)[-1]
    stem = _VERSION_TAIL.sub("", name)
    stem = stem[3:] if stem.startswith("lib") and len(stem) > 6 else stem
    names = [name]
    if len(stem) >= 4 and stem != name:
        names.append(stem)
    if evidence.product:
        names.append(plain_name(evidence.product))
    return tuple(dict.fromkeys(names))


def search_terms(path: str, evidence: FileEvidence) -> tuple[str, ...]:
    """Every name to look for in the notices for one file."""
    carried = (t for e in evidence.embedded for t in e.terms)
    return tuple(dict.fromkeys([*own_names(path, evidence), *carried]))


def named_terms(text: str, terms: Iterable[str]) -> tuple[str, ...]:
    """Which of `terms` a notice names, as a word, whatever the case."""
    low = text.lower()
    found = []
    for term in terms:
        pattern = rf"(?<![a-z0-9]){re.escape(term.lower())}(?![a-z0-9])"
        if re.search(pattern, low):
            found.append(term)
    return tuple(sorted(found))


# --- what the evidence says against the claim ------------------------------------------------

HOLDER, RESERVED, EMBEDDED, SIGNATURE = "holder", "reserved", "embedded", "signature"


@dataclass(frozen=True)
class Finding:
    """One way a file's own evidence contradicts the rule that claims it."""

    target: str
    path: str  # target-relative
    sha256: str
    kind: str  # HOLDER, RESERVED, EMBEDDED or SIGNATURE
    says: str  # the evidence, quoted, and what it contradicts
    code: Embedded | None = None  # an EMBEDDED finding's component

    @property
    def file(self) -> str:
        return f"{self.target}/{self.path}"


def findings(
    target: str,
    component: str,
    expression: str,
    files: Sequence[ShippedEvidence],
    *,
    licensor_lines: Sequence[str],
    text_paths: Sequence[str],
    unread_claim: bool,
    rule: str = "",
) -> tuple[Finding, ...]:
    """What the files' evidence says against `component`'s claim on `target`.

    `licensor_lines`: where the licensor is named (the copyright lines of the rule's texts, its
    `licensor`, its expression's LicenseRef ids); `text_paths`: the rule's own texts (a notice
    naming embedded code); `unread_claim`: the policy allows the expression without a person;
    `rule`: the recipe the claim is in."""
    found: list[Finding] = []
    for f in files:
        ev = f.evidence
        who = _who(target, f)
        unnoticed = "" if f.noticed_by else f"; no notice staged with it names {_or(f.own_names)}"
        for holder, line in _holder_lines(ev):
            if not names_holder(holder, licensor_lines):
                found.append(
                    Finding(
                        target,
                        f.path,
                        f.sha256,
                        HOLDER,
                        f"{who} says {line!r} ({ev.where}): {holder} is not {component}'s "
                        f"licensor — neither its licence texts nor its rule's `licensor` name "
                        f"{holder}{unnoticed}",
                    )
                )
        if ev.reserved and unread_claim:
            found.append(
                Finding(
                    target,
                    f.path,
                    f.sha256,
                    RESERVED,
                    f"{who} says {ev.reserved!r} ({ev.where}) under the permissive claim "
                    f"{expression}{unnoticed}",
                )
            )
        if unbacked := signature_problem(ev):
            found.append(Finding(target, f.path, f.sha256, SIGNATURE, f"{who} {unbacked}"))
        for code in ev.embedded:
            if not set(f.named_by(*code.terms)) & set(text_paths):
                version = f" {', '.join(code.versions)}" if code.versions else ""
                found.append(
                    Finding(
                        target,
                        f.path,
                        f.sha256,
                        EMBEDDED,
                        f"{who} carries {code.name}{version} (its bytes say {code.says!r}; "
                        f"{code.licence or 'terms unknown'}), which no licence text of "
                        f"{component} names ({_or(code.terms)}: in no notice of its "
                        f"[[targets.{target}.licenses]] rule in {rule or 'the recipe'})",
                        code,
                    )
                )
    return tuple(found)


def signature_problem(ev: FileEvidence) -> str:
    """How a PE file's Authenticode signature fails to back the maker its version resource
    names ("" when it does, or when the file names no maker or is not PE)."""
    sig, company = ev.signature, plain_name(ev.company)
    if sig is None or not company:
        return ""
    said = f"says CompanyName {ev.company!r} ({ev.where})"
    if sig.status == UNSIGNED:
        return f"{said} but carries no Authenticode signature"
    if sig.status != VALID:
        return f"{said} but its Authenticode signature is {sig.status}: {sig.problem}"
    if names_holder(company, [sig.organization, sig.subject]) or names_holder(
        sig.organization, [company]
    ):
        return ""
    return (
        f"{said} but is Authenticode-signed by {sig.subject} (certificate SHA-256 "
        f"{sig.sha256}), not by {company}"
    )


def _holder_lines(ev: FileEvidence) -> list[tuple[str, str]]:
    """Each holder the file names, with the line that names it (its maker's, when it has no
    copyright line)."""
    pairs: dict[str, str] = {}
    for line in ev.copyrights:
        if holder := holder_of(line):
            pairs.setdefault(holder, line)
    if not pairs and ev.company:
        pairs[plain_name(ev.company)] = f"CompanyName {ev.company}"
    return [(h, line) for h, line in pairs.items() if h in ev.holders]


def _who(target: str, f: ShippedEvidence) -> str:
    """The file, with what it says it is: "windows-x86_64/…/DirectML.dll (Microsoft
    Corporation, DirectML Redistributable Library 1.15.4)"."""
    ev = f.evidence
    product = " ".join(p for p in (plain_name(ev.product), ev.product_version) if p)
    said = ", ".join(p for p in (plain_name(ev.company), product) if p)
    return f"{target}/{f.path} ({said})" if said else f"{target}/{f.path}"


def _or(names: Sequence[str]) -> str:
    return " or ".join(names)


def licensor_lines(
    copyrights: Iterable[str], licensor: Iterable[str], license_ids: Iterable[str]
) -> tuple[str, ...]:
    """Where a claim names its licensor: its texts' copyright lines, its rule's `licensor`, and
    the holder a `LicenseRef-<Holder>-…` id names."""
    refs = [i for i in license_ids if i.startswith("LicenseRef-")]
    return (*copyrights, *licensor, *refs)


def fix_for(component: str, target: str, rule: str) -> str:
    """What a person does about a file whose evidence contradicts its rule."""
    return (
        f"compare the evidence with {component}'s terms; if the files are another's, give them "
        f"a [[targets.{target}.licenses]] rule of their own in {rule or 'the recipe'} (their "
        "holder's terms, e.g. LicenseRef-<Holder>-<Product>, which the policy reviews); if the "
        f"claim holds, confirm it there: [targets.{target}.licenses.confirmed] with reviewer, "
        "reason, sha256 of each file and reviewed"
    )


def embedded_fix(component: str, target: str, rule: str, code: Embedded) -> str:
    """What a person does about code a file carries that no notice of its rule names."""
    quoted = (
        f" with the copyright line the file holds ({code.copyrights[0]!r})"
        if (code.copyrights)
        else ""
    )
    return (
        f"add a text that names {code.name} to the `texts` of {component}'s "
        f"[[targets.{target}.licenses]] rule in {rule or 'the recipe'}: the archive's own notice "
        f"for it, or else the standard {code.text or code.licence} text{quoted}; if a person "
        f"finds it covered, confirm it there: [targets.{target}.licenses.confirmed] with "
        "reviewer, reason, sha256 of each file and reviewed"
    )


# --- guesses -----------------------------------------------------------------------------------


def guess_line(component: str, target: str, key: str, rule: str) -> str:
    """One guess the scaffold left in a rule, and what a person does about it."""
    return (
        f"{component} on {target}: `{key}` of its [[targets.{target}.licenses]] rule in "
        f"{rule or 'the recipe'} is the scaffold's guess — check it against the files' "
        f"evidence and the archive's notices, then remove {key!r} from `guessed` (a release "
        "refuses a guess)"
    )


# --- as records keep it ------------------------------------------------------------------------


def shipped_evidence_to_json(item: ShippedEvidence) -> dict[str, Any]:
    return {
        "path": item.path,
        "sha256": item.sha256,
        "evidence": evidence_to_json(item.evidence),
        "mentions": [{"name": m.name, "texts": list(m.texts)} for m in item.mentions],
    }


def shipped_evidence_from_json(data: Any) -> ShippedEvidence:
    return ShippedEvidence(
        path=str(data["path"]),
        sha256=str(data["sha256"]),
        evidence=evidence_from_json(data["evidence"]),
        mentions=tuple(
            Mention(str(m["name"]), tuple(str(t) for t in m["texts"])) for m in data["mentions"]
        ),
    )
