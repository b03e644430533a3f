"""One component's claims on one channel, judged against its files' own evidence: what each file
says of itself, what of that contradicts the rule (licensing/file_findings.py), which of it a
person's confirmation answers (and whether that is signed off), and the rule's guesses.

The audit (licensing/audit.py) turns the open findings into REVIEW problems, a release refuses
an unsigned confirmation and any guess; audit.json, the SBOM and report.html show it per file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import tomlkit

from ortbundle.licensing.attribution import ComponentUse
from ortbundle.licensing.file_findings import (
    Finding,
    ShippedEvidence,
    embedded_fix,
    findings,
    fix_for,
    guess_line,
    licensor_lines,
)
from ortbundle.licensing.waivers import ConfirmationUse, CoveredFile, confirmation_use
from ortbundle.stage.file_facts import evidence_to_json


@dataclass(frozen=True)
class Claims:
    """What a component's files say against its rules, on the targets a channel carries."""

    evidence: tuple[tuple[str, ShippedEvidence], ...] = ()  # (target, the file's)
    findings: tuple[tuple[Finding, bool], ...] = ()  # (finding, answered by a confirmation)
    # each unanswered finding: (what the file says against the rule, what a person does, the
    # file: "<target>/<path>")
    open_fixes: tuple[tuple[str, str, str], ...] = ()
    confirmations: tuple[ConfirmationUse, ...] = ()
    guesses: tuple[str, ...] = ()  # one line per key the scaffold guessed
    # per unanswered rule, the [confirmed] table a person pastes after reviewing its files
    tables: tuple[str, ...] = ()

    @property
    def open(self) -> tuple[str, ...]:
        """The problem each unanswered finding is, with its fix."""
        return tuple(f"{says} — {fix}" for says, fix, _ in self.open_fixes)

    @property
    def open_once(self) -> tuple[str, ...]:
        """The unanswered findings as a person reads them: a fix several files share is said
        once, after the files (issue #43: one long fix was printed four times)."""
        by_fix: dict[str, list[tuple[str, str]]] = {}
        for says, fix, file in self.open_fixes:
            by_fix.setdefault(fix, []).append((says, file))
        out = []
        for fix, said in by_fix.items():
            # a file may say two things against its rule (its "All rights reserved" and its
            # signature): the count is of files, as the confirmation's sha256 list is
            files = len({file for _, file in said})
            each = "this file" if files == 1 else f"each of these {files} files"
            says = "; ".join(s for s, _ in said)
            out.append(f"{says} — {fix}" if len(said) == 1 else f"{says} — for {each}: {fix}")
        return tuple(out)

    @property
    def embedded(self) -> tuple[tuple[str, str, str, tuple[str, ...]], ...]:
        """Third-party code the files carry: (file, library, what the bytes say, the notices
        naming it)."""
        return tuple(
            (f"{t}/{e.path}", code.name, code.says, e.named_by(*code.terms))
            for t, e in self.evidence
            for code in e.evidence.embedded
        )

    def rows(self) -> tuple[EvidenceRow, ...]:
        """One row per file that says anything of itself, for a person to read (report.html)."""
        against: dict[str, list[tuple[Finding, bool]]] = {}
        for f, answered in self.findings:
            against.setdefault(f.file, []).append((f, answered))
        unsigned = {
            f"{f.target}/{f.path}"
            for u in self.confirmations
            if not u.signed_off
            for f in u.covered
        }
        rows = []
        for t, e in self.evidence:
            ev = e.evidence
            if not ev.says_anything:
                continue
            file = f"{t}/{e.path}"
            found = against.get(file, [])
            product = " ".join(p for p in (ev.product, ev.product_version) if p)
            state = "ok" if not found else "confirmed" if all(a for _, a in found) else "review"
            if state == "confirmed" and file in unsigned:  # answered, but no one signed it
                state = "unsigned"
            rows.append(
                EvidenceRow(
                    file=file,
                    says=tuple(
                        p
                        for p in (ev.company, product, *ev.copyrights, *ev.licences, ev.signed)
                        if p
                    ),
                    where=ev.where,
                    carries=tuple(
                        f"{code.name} ({', '.join(e.named_by(*code.terms)) or 'no notice'})"
                        for code in ev.embedded
                    ),
                    named_by=e.noticed_by,
                    against=tuple(sorted({f.kind for f, _ in found})),
                    state=state,
                )
            )
        return tuple(rows)

    def refusals(self, component: str) -> list[str]:
        """What a release refuses: a confirmation not signed off, and every guess."""
        out = [f"{component}: {u.refusal()}" for u in self.confirmations if not u.signed_off]
        return out + [f"{component}: {g}" for g in self.guesses]

    def to_json(self) -> dict[str, Any]:
        """audit.json's part: per file its evidence and findings, the code it carries, the
        confirmations relied on, the guesses."""
        findings_of: dict[str, list[dict[str, Any]]] = {}
        for f, answered in self.findings:
            findings_of.setdefault(f.file, []).append(
                {"kind": f.kind, "says": f.says, "confirmed": answered}
            )
        return {
            "evidence": [
                {
                    "path": f"{t}/{e.path}",
                    "sha256": e.sha256,
                    "where": e.evidence.where,
                    **evidence_to_json(e.evidence),
                    "named_by": list(e.noticed_by),
                    "findings": findings_of.get(f"{t}/{e.path}", []),
                }
                for t, e in self.evidence
            ],
            "embedded": [
                {"file": file, "name": name, "says": says, "named_by": list(named)}
                for file, name, says, named in self.embedded
            ],
            "confirmations": [_confirmation_json(u) for u in self.confirmations],
            "guessed": list(self.guesses),
        }


@dataclass(frozen=True)
class EvidenceRow:
    """What one file says of itself, as report.html shows it."""

    file: str  # "<target>/<path>"
    says: tuple[str, ...]  # its maker, product and version, copyright and licence strings
    where: str  # "PE version resource", "ELF .rodata and .comment"
    carries: tuple[str, ...]  # third-party code, with the notices naming it
    named_by: tuple[str, ...]  # notices naming the file or its product
    against: tuple[str, ...]  # the kinds of finding against the claim ("holder", "reserved"…)
    state: str  # "ok", "review", "confirmed" or "unsigned" (confirmed, not signed off)


def _confirmation_json(u: ConfirmationUse) -> dict[str, Any]:
    c = u.confirmation
    return {
        "target": u.target,
        "rule": u.rule,
        "reviewer": c.reviewer,
        "reason": c.reason,
        "sha256": list(c.sha256),
        "reviewed": c.reviewed.isoformat() if c.reviewed else None,
        "expires": c.expires.isoformat() if c.expires else None,
        "covers": [{"path": f"{f.target}/{f.path}", "sha256": f.sha256} for f in u.covered],
        "signed_off": u.signed_off,
        "signoff_problems": list(u.problems),
    }


def judge_claims(
    name: str,
    uses: Sequence[tuple[str, ComponentUse]],
    allowed_unread: Callable[[str], bool],
    today: date,
) -> Claims:
    """Each target's rule against its files' evidence. `allowed_unread(expression)`: the
    channel's policy allows it without a person (a permissive claim)."""
    found: list[tuple[Finding, bool]] = []
    open_: list[tuple[str, str, str]] = []
    confirmations: list[ConfirmationUse] = []
    tables: list[str] = []
    for target, c in uses:
        against = findings(
            target,
            name,
            c.expression,
            c.evidence,
            licensor_lines=licensor_lines(c.copyrights, c.licensor, c.license_ids),
            text_paths=[t.path for t in c.texts],
            unread_claim=allowed_unread(c.expression),
            rule=c.rule,
        )
        if not against:
            continue
        if c.confirmed is None:
            fix = fix_for(name, target, c.rule)
            found += [(f, False) for f in against]
            open_ += [
                (f.says, embedded_fix(name, target, c.rule, f.code) if f.code else fix, f.file)
                for f in against
            ]
            tables.append(confirmation_table(name, target, c.rule, against, today))
            continue
        found += [(f, True) for f in against]
        covered = sorted({(f.path, f.sha256) for f in against})
        confirmations.append(
            confirmation_use(
                c.confirmed,
                component=name,
                target=target,
                rule=c.rule,
                covered=[CoveredFile(target, path, sha) for path, sha in covered],
                today=today,
            )
        )
    return Claims(
        evidence=tuple((t, e) for t, c in uses for e in c.evidence),
        findings=tuple(found),
        open_fixes=tuple(open_),
        confirmations=tuple(confirmations),
        guesses=tuple(guess_line(name, t, key, c.rule) for t, c in uses for key in c.guessed),
        tables=tuple(tables),
    )


def confirmation_table(
    component: str, target: str, rule: str, against: Sequence[Finding], today: date
) -> str:
    """The `[confirmed]` table that answers `against` once a person has reviewed the files,
    ready to paste after the component's [[targets.<target>.licenses]] rule: each file's
    SHA-256 (a confirmation covers those bytes and no others), and the fields a person fills."""
    document = tomlkit.document()
    document.add(
        tomlkit.comment(
            f"{rule or 'the recipe'}: after {component}'s [[targets.{target}.licenses]] rule"
        )
    )
    confirmed = tomlkit.table()
    # a placeholder a release refuses (licensing/waivers.py), until a person puts their name
    confirmed["reviewer"] = "unassigned: the person who compared the files with the texts"
    confirmed["reason"] = "what the files say, what the texts say, and why the claim holds"
    hashes = tomlkit.array().multiline(True)
    for path, sha256 in sorted({(f.path, f.sha256) for f in against}):
        hashes.add_line(sha256, comment=path)
    confirmed["sha256"] = hashes
    confirmed["reviewed"] = today
    targets = tomlkit.table(is_super_table=True)
    licenses = tomlkit.table(is_super_table=True)
    licenses["confirmed"] = confirmed
    targets[target] = tomlkit.table(is_super_table=True)
    targets[target]["licenses"] = licenses
    document["targets"] = targets
    return tomlkit.dumps(document)
