"""The licence audit: per channel, every shipped component against the policy, texts and waivers,
and every shipped file's own evidence against the rule that claims it.

Policy is data (`licenses/policy.toml`); waivers are a person's sign-off in the product
manifest. The audit never turns a gap into "OK": a waived gap is reported as WAIVED, with the
reason and the reviewer, every time it is relied on, and `--release` refuses it unless the
waiver is signed off, in date and names the bytes that ship (ortbundle/licensing/waivers.py).
A file whose evidence contradicts its rule (licensing/claims.py) is REVIEW, its evidence
quoted, until a person confirms the rule; a release takes a confirmation only signed off, and
no guess the scaffold left.
"""

from __future__ import annotations

import fnmatch
import json
import tomllib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ortbundle._core.errors import AuditError, ConfigError, OrtbundleError
from ortbundle._core.memo import NO_MEMO, Memo
from ortbundle.config.plan import POLICY_NAME, Project
from ortbundle.config.policy_overlay import PolicyOverlay, expand_sets
from ortbundle.config.products import Product, Waiver
from ortbundle.config.schema import check_document, display_name
from ortbundle.config.vocabulary import VERDICTS
from ortbundle.licensing.attribution import ComponentUse, TargetLicensing
from ortbundle.licensing.claims import Claims, judge_claims
from ortbundle.licensing.combining import Incompatible, Shipping, combination_of, incompatible_pairs
from ortbundle.licensing.obligations import is_model, obliging_ids
from ortbundle.licensing.spdx import NotAnExpression, Tree, facts
from ortbundle.licensing.waivers import CoveredFile, WaiverUse, use_of

if TYPE_CHECKING:
    pass

Verdict = Literal["allow", "review", "refuse"]
Status = Literal["ok", "waived", "review", "fail"]
_RANK: dict[str, int] = {verdict: rank for rank, verdict in enumerate(VERDICTS)}
AUDIT_SCHEMA = "ortbundle.audit/1"


@dataclass(frozen=True)
class ChannelPolicy:
    name: str
    targets: tuple[str, ...]  # globs over target names
    allow: tuple[str, ...]  # globs over licence ids, sets expanded
    review: tuple[str, ...]
    refuse: tuple[str, ...]
    unknown: Verdict
    # the product's [policy] overlay (config/policy_overlay.py), consulted before the lists
    # above; only this policy's own refusals come first
    first: tuple[tuple[Verdict, tuple[str, ...]], ...] = ()
    # [obligations]: licences whose binaries ship with their corresponding source (the whole
    # work's, or the covered files' only), on every channel
    source: tuple[str, ...] = ()
    source_files: tuple[str, ...] = ()
    combined: tuple[str, ...] = ()  # [obligations] combined: one program with the application

    def covers(self, target: str) -> bool:
        return any(fnmatch.fnmatchcase(target, glob) for glob in self.targets)

    def verdict_for_id(self, license_id: str) -> Verdict:
        """Refuse beats review beats allow: a broad allow glob cannot hide a refusal."""
        if any(fnmatch.fnmatchcase(license_id, g) for g in self.refuse):
            return "refuse"
        for mine, globs in self.first:
            if any(fnmatch.fnmatchcase(license_id, g) for g in globs):
                return mine
        if any(fnmatch.fnmatchcase(license_id, g) for g in self.review):
            return "review"
        if any(fnmatch.fnmatchcase(license_id, g) for g in self.allow):
            return "allow"
        return self.unknown

    def evaluate(self, expression: str, memo: Memo = NO_MEMO) -> Verdict:
        """AND needs every part acceptable; OR takes the best alternative. `memo`: where the
        expression's facts are kept (spdx.facts)."""
        return self._walk(facts(expression, memo).tree)

    def _walk(self, node: Tree) -> Verdict:
        kind, value = node
        if kind == "AND":
            return max((self._walk(a) for a in value), key=_RANK.__getitem__)
        if kind == "OR":
            return min((self._walk(a) for a in value), key=_RANK.__getitem__)
        return self.verdict_for_id(value)  # "X WITH exception": judged as X


@dataclass(frozen=True)
class Policy:
    path: Path
    channels: dict[str, ChannelPolicy]
    sets: dict[str, tuple[str, ...]] = field(default_factory=dict)  # expanded
    source: tuple[str, ...] = ()  # [obligations]: as ChannelPolicy's, expanded
    source_files: tuple[str, ...] = ()
    combined: tuple[str, ...] = ()
    incompatible: tuple[Incompatible, ...] = ()  # [[incompatible]] (compatibility.py)

    def channel(self, name: str) -> ChannelPolicy:
        if name not in self.channels:
            raise ConfigError(
                f"the licence policy has no channel {name!r}",
                file=str(self.path),
                fix=f"use one of: {', '.join(sorted(self.channels))}, or add [channels.{name}]",
            )
        return self.channels[name]


def load_policy(path: Path) -> Policy:
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            "the licence policy is missing", file=str(path), fix="restore licenses/policy.toml"
        ) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:  # as config/tomlreader.py says
        raise ConfigError(f"not valid TOML: {exc}", file=str(path)) from None
    # the schema holds every shape (tables, lists of strings, the verdicts): only the sets'
    # names are left to check here
    check_document(display_name(path), data, "policy", path=str(path))
    sets = data.get("sets", {})

    def expand(values: list[str], where: str, seen: tuple[str, ...] = ()) -> tuple[str, ...]:
        out: list[str] = []
        for value in values:
            if value.startswith("@"):
                if value[1:] not in sets:
                    raise ConfigError(f"{where}: unknown set {value}", file=str(path))
                if value[1:] in seen:
                    raise ConfigError(f"{where}: set {value} includes itself", file=str(path))
                out.extend(expand(sets[value[1:]], f"sets.{value[1:]}", (*seen, value[1:])))
            else:
                out.append(value)
        return tuple(out)

    obligations = data.get("obligations", {})
    source = expand(obligations.get("source", []), "obligations.source")
    source_files = expand(obligations.get("source_files", []), "obligations.source_files")
    combined = expand(obligations.get("combined", []), "obligations.combined")
    channels: dict[str, ChannelPolicy] = {}
    for name, table in data.get("channels", {}).items():
        channels[name] = ChannelPolicy(
            name=name,
            targets=expand(table.get("targets", ["*"]), f"channels.{name}.targets"),
            allow=expand(table.get("allow", []), f"channels.{name}.allow"),
            review=expand(table.get("review", []), f"channels.{name}.review"),
            refuse=expand(table.get("refuse", []), f"channels.{name}.refuse"),
            unknown=table.get("unknown", "review"),
            source=source,
            source_files=source_files,
            combined=combined,
        )
    expanded = {name: expand(sets[name], f"sets.{name}", (name,)) for name in sets}
    return Policy(
        path=path,
        channels=channels,
        sets=expanded,
        source=source,
        source_files=source_files,
        combined=combined,
        incompatible=incompatible_pairs(data.get("incompatible", []), expand),
    )


@dataclass(frozen=True)
class ComponentAudit:
    name: str
    version: str
    expression: str
    purl: str
    files: tuple[str, ...]  # "<target>/<path>"
    size: int
    texts: tuple[str, ...]  # "<target>/<path>"
    text_present: bool
    verdict: Verdict
    status: Status
    waivers: tuple[Waiver, ...]
    problems: tuple[str, ...]
    waiver_uses: tuple[WaiverUse, ...] = ()  # the waivers relied on, with their sign-off state
    claims: Claims = field(default_factory=Claims)  # its files' evidence against its rules
    # how it is combined with the application, and why that is (or is not) allowed; "" when
    # its licence does not bind what it is combined with
    combination: str = ""

    @property
    def said(self) -> tuple[str, ...]:
        """Its problems as a person reads them: a fix several files share is said once."""
        own = set(self.claims.open)
        return (*(p for p in self.problems if p not in own), *self.claims.open_once)

    @property
    def awaiting(self) -> Counter[str]:
        """What a person must still do before `--release` takes it, by kind (_AWAITING); a
        failure is not counted here: it fails the audit already."""
        out: Counter[str] = Counter()
        if self.status == "fail":
            return out
        if self.status == "review":
            out["file"] = len({f.file for f, answered in self.claims.findings if not answered})
            out["licence"] = int(self.verdict == "review")
            out["stale"] = len(self.problems) - len(self.claims.open) - out["licence"]
        unsigned = [u for u in self.waiver_uses if not u.signed_off]
        out["waiver"] = len(unsigned)
        # a text a signed-off waiver accepts the lack of is a person's answer; else it waits
        out["text"] = int(not self.text_present and bool(unsigned))
        out["confirmation"] = sum(1 for u in self.claims.confirmations if not u.signed_off)
        out["guess"] = len(self.claims.guesses)
        return +out


# what awaits a person, by kind: (one, several)
_AWAITING = {
    "file": ("file awaits review", "files await review"),
    "licence": ("licence awaits review", "licences await review"),
    "stale": ("waiver no longer applies", "waivers no longer apply"),
    "waiver": ("waiver unsigned", "waivers unsigned"),
    "text": ("text missing", "texts missing"),
    "confirmation": ("confirmation unsigned", "confirmations unsigned"),
    "guess": ("scaffold guess", "scaffold guesses"),
    "unused": ("waiver matches no file", "waivers match no file"),
}


@dataclass(frozen=True)
class ChannelAudit:
    channel: str
    targets: tuple[str, ...]
    components: tuple[ComponentAudit, ...]
    unused_waivers: tuple[Waiver, ...]
    release: bool

    @property
    def waived(self) -> tuple[ComponentAudit, ...]:
        return tuple(c for c in self.components if c.status == "waived")

    @property
    def failures(self) -> tuple[str, ...]:
        out = [f"{c.name}: {p}" for c in self.components if c.status == "fail" for p in c.said]
        if self.release:
            out += [
                f"{c.name}: {p} (review — a release needs none)"
                for c in self.components
                if c.status == "review"
                for p in c.said
            ]
            out += [
                f"{c.name}: {u.refusal()}"
                for c in self.components
                if c.status == "waived"
                for u in c.waiver_uses
                if not u.signed_off
            ]
            out += [f"waiver for {w.file} matches no shipped file" for w in self.unused_waivers]
            out += [r for c in self.components for r in c.claims.refusals(c.name)]
        return tuple(out)

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def awaiting(self) -> tuple[str, ...]:
        """What a person must still do before `--release` accepts this channel, counted
        ("2 files await review", "1 waiver unsigned"); empty when nothing waits."""
        counted: Counter[str] = Counter()
        for c in self.components:
            counted += c.awaiting
        counted["unused"] += len(self.unused_waivers)
        return tuple(
            f"{counted[kind]} {one if counted[kind] == 1 else several}"
            for kind, (one, several) in _AWAITING.items()
            if counted[kind]
        )

    @property
    def headline(self) -> str:
        """The verdict, the same words in the console, build-summary.json and report.html:
        "passed" only when nothing awaits a person (issue #43)."""
        if not self.passed:
            return "FAILED"
        if self.awaiting:
            return f"passes for development; {', '.join(self.awaiting)}: `--release` will refuse"
        return "passed"


def audit_channel(
    policy: ChannelPolicy,
    licensing: Sequence[TargetLicensing],
    waivers: Iterable[Waiver],
    *,
    release: bool,
    today: date | None = None,
    memo: Memo = NO_MEMO,
    shipping: Shipping | None = None,
) -> ChannelAudit:
    """`today` decides which waivers have expired (default: today's date, UTC); `memo` is the
    build's, where each licence expression's facts are kept; `shipping`: the product's licence
    and package, against which a component the policy's [obligations] combined names is
    judged (None: not judged)."""
    today = today or datetime.now(UTC).date()
    targets = tuple(t for t in licensing if policy.covers(t.target))
    relevant = _relevant_waivers(policy, waivers, targets)
    components: list[ComponentAudit] = []
    used: set[int] = set()  # indices into `relevant` of the waivers a shipped file matches
    for (name, version), uses in sorted(_uses_by_component(targets).items()):
        audit, hit = _audit_component(policy, name, version, uses, relevant, today, memo, shipping)
        components.append(audit)
        used |= hit
    return ChannelAudit(
        channel=policy.name,
        targets=tuple(t.target for t in targets),
        components=tuple(components),
        unused_waivers=tuple(w for i, w in enumerate(relevant) if i not in used),
        release=release,
    )


# one component as it ships on one target: (target, the component there)
_Use = tuple[str, ComponentUse]


def _relevant_waivers(
    policy: ChannelPolicy, waivers: Iterable[Waiver], targets: tuple[TargetLicensing, ...]
) -> list[Waiver]:
    """The waivers for this channel (or every channel) and for a target it covers (or any)."""
    return [
        w
        for w in waivers
        if not w.channels or policy.name in w.channels
        if not w.targets or any(t.target in w.targets for t in targets)
    ]


def _uses_by_component(targets: tuple[TargetLicensing, ...]) -> dict[tuple[str, str], list[_Use]]:
    """Each (component, version) with where it ships: one audit row however many targets."""
    grouped: dict[tuple[str, str], list[_Use]] = {}
    for tl in targets:
        for component in tl.components:
            grouped.setdefault((component.name, component.version), []).append(
                (tl.target, component)
            )
    return grouped


def _audit_component(
    policy: ChannelPolicy,
    name: str,
    version: str,
    uses: list[_Use],
    relevant: list[Waiver],
    today: date,
    memo: Memo,
    shipping: Shipping | None = None,
) -> tuple[ComponentAudit, frozenset[int]]:
    """One component's row: the policy's verdict on its licence, its texts, and the waivers
    covering its files; with the indices of the waivers any of its files matches."""
    expression = _combined_expression(uses)
    verdict = policy.evaluate(expression, memo)
    files = [(t, f.path) for t, c in uses for f in c.files]
    own_files = [(t, f.path) for t, c in uses for f in c.files if f.link_to is None]
    text_present = all(c.has_text for _, c in uses)
    problems = _policy_problems(policy, expression, verdict, uses, text_present)
    unsourced = _source_problem(policy, name, uses)
    problems += unsourced
    combination, combined_refused = combination_of(policy.combined, name, uses, shipping)
    if combined_refused:
        problems.insert(0, combination)
    claims = judge_claims(name, uses, lambda e: policy.evaluate(e, memo) == "allow", today)
    problems += claims.open
    waived = _match_waivers(relevant, own_files, expression, memo)
    problems += waived.problems
    # no waiver stands in for the corresponding source a licence asks to ship with the binary
    covered = waived.covers(own_files) and not unsourced
    status = "fail" if combined_refused else _status(verdict, problems, covered, text_present)
    shipped = [
        CoveredFile(t, f.path, f.sha256) for t, c in uses for f in c.files if f.link_to is None
    ]
    audit = ComponentAudit(
        name=name,
        version=version,
        expression=expression,
        purl=uses[0][1].purl,
        files=tuple(f"{t}/{p}" for t, p in sorted(files)),
        size=sum(c.size for _, c in uses),
        texts=tuple(sorted(f"{t}/{x.path}" for t, c in uses for x in c.texts)),
        text_present=text_present,
        verdict=verdict,
        status=status,
        waivers=waived.matched if status == "waived" else (),
        problems=tuple(problems),
        waiver_uses=tuple(use_of(w, shipped, today) for w in waived.matched)
        if status == "waived"
        else (),
        claims=claims,
        combination=combination,
    )
    return audit, waived.used


def _combined_expression(uses: list[_Use]) -> str:
    """The licence the channel ships the component under: where targets state it differently,
    all of them at once."""
    expressions = {c.expression for _, c in uses}
    return " AND ".join(sorted(expressions)) if len(expressions) > 1 else uses[0][1].expression


def _policy_problems(
    policy: ChannelPolicy, expression: str, verdict: Verdict, uses: list[_Use], text_present: bool
) -> list[str]:
    """What the policy and the texts say is wrong, in the order the audit reports it."""
    problems: list[str] = []
    if verdict == "refuse":
        problems.append(f"licence {expression} is refused on the {policy.name} channel")
    if not text_present:
        missing = sorted(t for t, c in uses if not c.has_text)
        problems.append(f"no licence text ({', '.join(missing)})")
    if verdict == "review":
        problems.append(f"licence {expression} needs review on the {policy.name} channel")
    return problems


def _source_problem(policy: ChannelPolicy, name: str, uses: list[_Use]) -> list[str]:
    """A component whose licence requires its source with the binary (GPL, LGPL, AGPL; MPL
    for its own files) and whose recipe pins no source archives for what it ships."""
    globs = (*policy.source, *policy.source_files)
    obliged = [(t, c) for t, c in uses if not is_model(c) and obliging_ids(c.expression, globs)]
    obliging = sorted({i for _, c in obliged for i in obliging_ids(c.expression, globs)})
    unsourced = sorted({t for t, c in obliged if not any(s.build for s in c.sources)})
    if not unsourced:
        return []
    rule = uses[0][1].rule or "its recipe"
    return [
        f"{name} is {', '.join(obliging)}, which requires its corresponding source with the "
        f"binary, and no source is pinned for it ({', '.join(unsourced)}): add "
        f"[sources.<id>.build] naming its source archives to {rule}"
    ]


@dataclass(frozen=True)
class _WaiverMatch:
    """The waivers one component's files match: those accepting its licence, the indices of
    every one matched, and a problem for each that accepts a licence it no longer has."""

    matched: tuple[Waiver, ...]
    used: frozenset[int]
    problems: tuple[str, ...]

    def covers(self, own_files: list[tuple[str, str]]) -> bool:
        """Some accepting waiver names every file the component ships (links aside)."""
        return bool(self.matched) and all(
            any(
                fnmatch.fnmatchcase(p, w.file) and (not w.targets or t in w.targets)
                for w in self.matched
            )
            for t, p in own_files
        )


def _match_waivers(
    relevant: list[Waiver], own_files: list[tuple[str, str]], expression: str, memo: Memo
) -> _WaiverMatch:
    """Each relevant waiver against the component's own files (target, path), in order."""
    matched: list[Waiver] = []
    used: set[int] = set()
    problems: list[str] = []
    for index, waiver in enumerate(relevant):
        hits = [
            (t, p)
            for t, p in own_files
            if fnmatch.fnmatchcase(p, waiver.file) and (not waiver.targets or t in waiver.targets)
        ]
        if not hits:
            continue
        used.add(index)
        if _same_expression(waiver.license, expression, memo):
            matched.append(waiver)
        else:
            problems.append(
                f"waiver for {waiver.file} accepts {waiver.license}, but the file is now "
                f"{expression}: the waiver no longer applies"
            )
    return _WaiverMatch(tuple(matched), frozenset(used), tuple(problems))


def _status(verdict: Verdict, problems: list[str], covered: bool, text_present: bool) -> Status:
    """A refusal fails whatever else holds; a gap all of whose files a waiver covers is waived."""
    if verdict == "refuse":
        return "fail"  # no waiver overrides a refusal: the policy itself must change
    if not problems:
        return "ok"
    if covered:
        return "waived"
    if not text_present:
        return "fail"
    return "review"


def _same_expression(a: str, b: str, memo: Memo) -> bool:
    try:
        return facts(a, memo).simplified == facts(b, memo).simplified
    except NotAnExpression:  # an unparsable waiver licence simply does not match
        return False


def report_json(
    product: str, version: str, audits: Sequence[ChannelAudit], licensing: Sequence[TargetLicensing]
) -> str:
    def waiver(w: Waiver) -> dict[str, Any]:
        return {
            "file": w.file,
            "license": w.license,
            "reason": w.reason,
            "reviewer": w.reviewer,
            "targets": list(w.targets),
            "channels": list(w.channels),
            "sha256": list(w.sha256),
            "reviewed": w.reviewed.isoformat() if w.reviewed else None,
            "expires": w.expires.isoformat() if w.expires else None,
        }

    def use(u: WaiverUse) -> dict[str, Any]:
        return {
            **waiver(u.waiver),
            "covers": [{"path": f"{f.target}/{f.path}", "sha256": f.sha256} for f in u.covered],
            "signed_off": u.signed_off,
            "signoff_problems": list(u.problems),
        }

    document = {
        "schema": AUDIT_SCHEMA,
        "product": {"name": product, "version": version},
        "passed": all(a.passed for a in audits),
        "attribution": [
            {
                "target": tl.target,
                "files": _attributed_files(tl),
            }
            for tl in licensing
        ],
        "channels": [
            {
                "channel": a.channel,
                "targets": list(a.targets),
                "release": a.release,
                "passed": a.passed,
                "headline": a.headline,
                "failures": list(a.failures),
                "components": [
                    {
                        "name": c.name,
                        "version": c.version,
                        "license": c.expression,
                        "purl": c.purl,
                        "files": list(c.files),
                        "size": c.size,
                        "texts": list(c.texts),
                        "text_present": c.text_present,
                        "policy": c.verdict,
                        "status": c.status,
                        "problems": list(c.problems),
                        **({"combination": c.combination} if c.combination else {}),
                        "waivers": [use(u) for u in c.waiver_uses],
                        **c.claims.to_json(),
                    }
                    for c in a.components
                ],
                "unused_waivers": [waiver(w) for w in a.unused_waivers],
            }
            for a in audits
        ],
    }
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def _attributed_files(licensing: TargetLicensing) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for c in licensing.components:
        items += [{"path": f.path, "size": f.size, "component": c.name} for f in c.files]
        items += [{"path": t.path, "size": t.size, "component": c.name} for t in c.texts]
    return sorted(items, key=lambda item: str(item["path"]))


# --- the gate over a build's targets ---------------------------------------------------------


class AuditFailed(AuditError):
    """The gate refused: carries the audits so the report is printed before the exit."""

    def __init__(
        self,
        product: Product,
        audits: tuple[ChannelAudit, ...],
        licensing: list[TargetLicensing],
        also: Sequence[OrtbundleError] = (),  # the build's other refusals, said after it
    ) -> None:
        channels = ", ".join(a.channel for a in audits if not a.passed)
        generic = (
            "add the missing texts or policy entries; a release accepts a waiver only when "
            "a person has signed it off (reviewer, sha256, reviewed, expires: see each FAIL line)"
        )
        where = _recipe_fixes(audits, licensing)
        others = "".join(f"\nand: {e.message} [{e.file}] — fix: {e.fix}" for e in also)
        super().__init__(
            f"the licence audit failed for: {channels}{others}",
            fix=f"{where}; for anything else, {generic}" if where else generic,
        )
        self.product = product
        self.audits = audits
        self.licensing = licensing


def _recipe_fixes(audits: Sequence[ChannelAudit], licensing: Sequence[TargetLicensing]) -> str:
    """What waits in each recipe, said once for the whole build (each FAIL line repeats per
    channel): the scaffold's guesses a release refuses, and the [confirmed] tables printed
    above for files a person must review ("" when neither)."""
    failed = [a for a in audits if not a.passed]
    release_targets = {t for a in failed if a.release for t in a.targets}
    guesses: dict[str, set[tuple[str, str, str]]] = {}
    for target in licensing:
        if target.target not in release_targets:
            continue
        for c in target.components:
            keys = {(target.target, c.name, key) for key in c.guessed}
            if keys:
                guesses.setdefault(c.rule or "the recipe", set()).update(keys)
    tables: dict[str, set[str]] = {}
    for a in failed:
        for row in a.components:
            for table in row.claims.tables:
                rule = table.split("\n", 1)[0].removeprefix("# ").split(": after ", 1)[0]
                tables.setdefault(rule, set()).add(table)
    said = []
    for rule in sorted(guesses.keys() | tables.keys()):
        parts = []
        if n := len(guesses.get(rule, ())):
            parts.append(
                f"{n} key{'s' if n > 1 else ''} the scaffold guessed (check each, then remove "
                "it from its rule's `guessed`)"
            )
        if n := len(tables.get(rule, ())):
            parts.append(
                f"{n} [confirmed] table{'s' if n > 1 else ''} printed above to paste once a "
                "person has reviewed its files"
            )
        said.append(f"in {rule}: {' and '.join(parts)}")
    return "; ".join(said)


def audit_targets(
    project: Project,
    product: Product,
    licensing: Sequence[TargetLicensing],
    *,
    channels: Sequence[str] = (),
    release: bool,
    memo: Memo,
) -> tuple[ChannelAudit, ...]:
    """The channels whose targets were built, each against the policy and the waivers (or,
    named in `channels`, those channels whatever they carry); `release` is strict; `memo`: the
    build's (off for a release: every expression is parsed again)."""
    policy = with_overlay(load_policy(project.licenses / POLICY_NAME), product.policy)
    shipping = Shipping(
        product.name,
        product.license,
        product.packaging.package_name,
        product.addon_of.name if product.addon_of else None,
    )
    built = {tl.target for tl in licensing}
    audits = []
    for name in channels or product.channels:
        channel = policy.channel(name)
        if channels or any(channel.covers(t) for t in built):
            audits.append(
                audit_channel(
                    channel,
                    licensing,
                    product.waivers,
                    release=release,
                    memo=memo,
                    shipping=shipping,
                )
            )
    # a target no package carries (windows-arm64 today) is still published under dist/: it is
    # audited as what it is, the stage, so no built byte goes unaudited
    covered = {t for a in audits for t in a.targets}
    bare = [tl for tl in licensing if tl.target not in covered]
    if bare and not channels:
        if STAGE_CHANNEL not in policy.channels:
            raise ConfigError(
                f"no package carries {', '.join(tl.target for tl in bare)}, and the licence "
                f"policy has no [channels.{STAGE_CHANNEL}] to audit such a stage",
                file=str(policy.path),
                fix=f'add [channels.{STAGE_CHANNEL}] with targets = ["*"] (see the repository\'s '
                "licenses/policy.toml)",
            )
        audits.append(
            audit_channel(
                policy.channel(STAGE_CHANNEL),
                bare,
                product.waivers,
                release=release,
                memo=memo,
                shipping=shipping,
            )
        )
    return tuple(audits)


STAGE_CHANNEL = "stage"


def with_overlay(policy: Policy, overlay: PolicyOverlay) -> Policy:
    """The project's policy with a product's `[policy]` consulted first on the channels it
    names (the project's own refusals still come before it)."""
    if overlay.empty:
        return policy
    own = dict(overlay.sets)
    channels = dict(policy.channels)
    for extra in overlay.channels:
        where = f"policy.channels.{extra.name}"
        if extra.name not in channels:
            raise ConfigError(
                f"{where}: the licence policy has no channel {extra.name!r}",
                file=overlay.origin,
                fix=f"use one of: {', '.join(sorted(channels))}",
            )
        first: list[tuple[Verdict, tuple[str, ...]]] = []
        for verdict, globs in extra.rules:
            expanded = expand_sets(globs, own, policy.sets)
            if isinstance(expanded, str):
                raise ConfigError(
                    f"{where}.{verdict}: unknown set {expanded}",
                    file=overlay.origin,
                    fix="define it under [policy.sets] or use one of licenses/policy.toml's: "
                    + ", ".join(f"@{n}" for n in sorted(policy.sets)),
                )
            first.append((verdict, expanded))
        base = channels[extra.name]
        unknown = extra.unknown or base.unknown
        channels[extra.name] = replace(base, first=tuple(first), unknown=unknown)
    return replace(policy, channels=channels)
