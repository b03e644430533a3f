"""Waivers (and rule confirmations) a release can honour: a person's sign-off bound to the
bytes they judged.

A waiver (a `[[waivers]]` entry in the product manifest) says a shipped file's licence gap is
accepted. A development build relies on any waiver and says so; a `--release` build relies only
on one that is **signed off**: it names the SHA-256 of the file it covers (new bytes re-open the
question), a reviewer who is a person (not a placeholder), the date of the review (not in the
future) and an expiry (not passed). Anything less fails the release with what a person must do.
A [[licenses]] rule's `confirmed` (licensing/file_findings.py: the claim holds although its files'
evidence says otherwise) is signed off the same way, its expiry optional.

Also here, for `pin --check`: whether a newer release of a pinned runtime still ships a waived
file — when it does not, the waiver (and the gap) can go.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date

from ortbundle.config.products import Waiver
from ortbundle.config.recipes import Confirmation

# A reviewer that is no one yet: "unassigned: …", "TODO", "TBD", "nobody", "placeholder", "n/a",
# "-", "?". A word ends at a word boundary ("Tobias" is a person); dashes or question marks
# are a placeholder when nothing but space follows them.
_PLACEHOLDER = re.compile(
    r"^\s*(?:(unassigned|unknown|todo|tbd|tbc|none|nobody|no one|placeholder|n/?a)\b|[-?]+(?!\S))",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class CoveredFile:
    """A shipped file a waiver covers: where, and the bytes it has in this build."""

    target: str
    path: str  # target-relative
    sha256: str


def is_placeholder(reviewer: str) -> bool:
    return not reviewer.strip() or bool(_PLACEHOLDER.match(reviewer))


def signoff_problems(
    waiver: Waiver, covered: Sequence[CoveredFile], today: date
) -> tuple[str, ...]:
    """Why a release cannot rely on this waiver (empty: it is signed off and in date)."""
    return _gaps(
        waiver.reviewer,
        waiver.sha256,
        waiver.reviewed,
        waiver.expires,
        covered,
        today,
        what="the file it accepts",
        expiry_required=True,
    )


def _gaps(
    reviewer: str,
    sha256: Sequence[str],
    reviewed: date | None,
    expires: date | None,
    covered: Sequence[CoveredFile],
    today: date,
    *,
    what: str,
    expiry_required: bool,
) -> tuple[str, ...]:
    """What a sign-off (a waiver's, a rule's confirmation) lacks for a release: a person, the
    digest of every file it covers, a review date not in the future, an expiry not passed."""
    problems: list[str] = []
    if is_placeholder(reviewer):
        problems.append(f"the reviewer is a placeholder ({reviewer!r}), not a person")
    if not sha256:
        problems.append(f"it names no sha256 of {what}")
    else:
        for f in covered:
            if f.sha256 not in sha256:
                problems.append(
                    f"the bytes changed: {f.target}/{f.path} is sha256 {f.sha256}, the review "
                    f"was of {' or '.join(sha256)}"
                )
    if reviewed is None:
        problems.append("it has no review date (reviewed = YYYY-MM-DD)")
    elif reviewed > today:
        problems.append(f"its review date {reviewed.isoformat()} is in the future")
    if expires is None:
        if expiry_required:
            problems.append("it has no expiry (expires = YYYY-MM-DD)")
    elif expires <= today:
        problems.append(f"it expired on {expires.isoformat()}")
    elif reviewed is not None and expires <= reviewed:
        problems.append("it expires before it was reviewed")
    return tuple(problems)


def what_to_do(waiver: Waiver, covered: Sequence[CoveredFile]) -> str:
    """The exact steps that turn this waiver into one a release accepts."""
    digests = [f'"{d}"' for d in sorted({f.sha256 for f in covered})]
    sha = digests[0] if len(digests) == 1 else f"[{', '.join(digests)}]"
    where = ", ".join(sorted(f"{f.target}/{f.path}" for f in covered)) or waiver.file
    return (
        f"a person must read the terms of {where} ({waiver.license}) and, if they allow shipping "
        f"it, edit {waiver.entry or '[[waivers]]'} (file = {waiver.file!r}) in "
        f"{waiver.manifest or 'the product manifest'}: "
        f'reviewer = "<their name>", sha256 = {sha}, reviewed = <the review date>, '
        "expires = <when it must be looked at again>; or supply the licence text and drop the "
        "waiver"
    )


@dataclass(frozen=True)
class WaiverUse:
    """A waiver as one component's audit relies on it: the files, and what a release lacks."""

    waiver: Waiver
    covered: tuple[CoveredFile, ...]
    problems: tuple[str, ...]  # empty: signed off, in date, same bytes

    @property
    def signed_off(self) -> bool:
        return not self.problems

    def refusal(self) -> str:
        """Why a release refuses it, and what a person must do."""
        return (
            f"waiver for {self.waiver.file} is not signed off for a release: "
            f"{'; '.join(self.problems)} — {what_to_do(self.waiver, self.covered)}"
        )

    def summary(self) -> str:
        w = self.waiver
        if self.signed_off:
            return (
                f"reviewed by {w.reviewer} on {w.reviewed}, expires {w.expires}, "
                f"sha256 {', '.join(w.sha256)}"
            )
        return f"reviewed by {w.reviewer} — NOT SIGNED OFF: {'; '.join(self.problems)}"


def use_of(waiver: Waiver, files: Iterable[CoveredFile], today: date) -> WaiverUse:
    covered = covered_files(waiver, files)
    return WaiverUse(waiver, covered, signoff_problems(waiver, covered, today))


def covered_files(waiver: Waiver, files: Iterable[CoveredFile]) -> tuple[CoveredFile, ...]:
    return tuple(
        f
        for f in files
        if fnmatch.fnmatchcase(f.path, waiver.file)
        and (not waiver.targets or f.target in waiver.targets)
    )


@dataclass(frozen=True)
class ConfirmationUse:
    """A rule's confirmation as one component's audit relies on it: the files whose evidence it
    answers, and what a release lacks."""

    confirmation: Confirmation
    component: str
    target: str
    rule: str  # "recipes/<name>.toml"
    covered: tuple[CoveredFile, ...]
    problems: tuple[str, ...]  # empty: signed off, in date, same bytes

    @property
    def signed_off(self) -> bool:
        return not self.problems

    def refusal(self) -> str:
        """Why a release refuses it, and what a person must do."""
        digests = sorted({f.sha256 for f in self.covered})
        sha = ", ".join(f'"{d}"' for d in digests)
        where = ", ".join(f"{f.target}/{f.path}" for f in self.covered)
        return (
            f"the confirmation of {self.component}'s claim on {self.target} is not signed off "
            f"for a release: {'; '.join(self.problems)} — a person must compare the evidence "
            f"of {where} with its terms and, if the claim holds, edit "
            f"[targets.{self.target}.licenses.confirmed] (component = {self.component!r}) in "
            f'{self.rule or "the recipe"}: reviewer = "<their name>", sha256 = [{sha}], '
            "reviewed = <the review date>"
        )

    def summary(self) -> str:
        c = self.confirmation
        files = ", ".join(f"{f.target}/{f.path}" for f in self.covered)
        if self.signed_off:
            return f"{files}: confirmed by {c.reviewer} on {c.reviewed} — {c.reason}"
        return f"{files}: confirmed by {c.reviewer} — NOT SIGNED OFF: {'; '.join(self.problems)}"


def confirmation_use(
    confirmation: Confirmation,
    *,
    component: str,
    target: str,
    rule: str,
    covered: Sequence[CoveredFile],
    today: date,
) -> ConfirmationUse:
    """A confirmation answering these files' evidence: the sign-off a waiver has, but an
    expiry only when it names one (the digests bind it to the bytes compared)."""
    problems = _gaps(
        confirmation.reviewer,
        confirmation.sha256,
        confirmation.reviewed,
        confirmation.expires,
        covered,
        today,
        what="the files it confirms",
        expiry_required=False,
    )
    return ConfirmationUse(confirmation, component, target, rule, tuple(covered), problems)


@dataclass(frozen=True)
class ObsoleteWaiver:
    """A waiver whose file a newer release of its runtime no longer ships."""

    waiver: Waiver
    component: str
    version: str  # the newer release

    def line(self) -> str:
        return (
            f"{self.component} {self.version} no longer ships {self.waiver.file} "
            f"({self.waiver.license}): after moving to it, the waiver for {self.waiver.file} "
            "can be removed"
        )


def waivers_a_release_drops(
    waivers: Iterable[Waiver],
    *,
    component: str,
    version: str,
    runtime_dir: str,
    target: str,
    current_files: Iterable[str],
    newer_files: Iterable[str],
) -> tuple[ObsoleteWaiver, ...]:
    """Which waivers a newer release of a runtime makes unnecessary, for `pin --check`.

    `current_files` and `newer_files` are the file names (not paths) the pinned and the newer
    release ship for this runtime on `target` — the kept set, or simply the library names in
    each archive under the recipe's take globs (a file the archive lacks cannot ship); the
    runtime stages under `runtime_dir` ("runtimes/webgpu", "plugins/ep-webgpu"). A waiver whose
    glob matches one of today's files there and none of the newer release's is reported; one
    naming other files, other targets, or a file the newer release still ships is not. Pure:
    the caller (pin --check) fetches the newer release's listing.
    """
    prefix = runtime_dir.rstrip("/") + "/"
    current = [prefix + name for name in current_files]
    newer = [prefix + name for name in newer_files]
    found = []
    for waiver in waivers:
        if waiver.targets and target not in waiver.targets:
            continue
        if not any(fnmatch.fnmatchcase(p, waiver.file) for p in current):
            continue
        if not any(fnmatch.fnmatchcase(p, waiver.file) for p in newer):
            found.append(ObsoleteWaiver(waiver, component, version))
    return tuple(found)
