"""`invoke pin --check`: is every pin still current, still published, still the bytes the
registry vouches for? Read-only: nothing is downloaded, nothing rewritten."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from packaging.utils import canonicalize_name
from packaging.version import Version

from ortbundle._core.errors import ConfigError, FetchError, IntegrityError, OrtbundleError
from ortbundle._core.locations import ENV_MAVEN_URL, ENV_NPM_REGISTRY
from ortbundle.config.plan import Project
from ortbundle.config.sources import Source, load_sources
from ortbundle.fetch.cache import Cache, default_cache_dir
from ortbundle.fetch.http import CHUNK
from ortbundle.fetch.index import version_or_none
from ortbundle.fetch.registry import Digests, Published
from ortbundle.licensing.waivers import ObsoleteWaiver
from ortbundle.tools.pin.lookups import Listed, Lookups, listed_files, lookups, newest_release
from ortbundle.tools.pin.options import VERSIONED, PinOptions, PinStatus, project_of, version_of
from ortbundle.tools.pin.select import main_project
from ortbundle.tools.pin.waiver_watch import obsolete_waivers, product_waivers
from ortbundle.tools.pin.wheels import newest_wheels

# --- check -------------------------------------------------------------------------------------

_SEVERITY = {
    "current": 0,
    "held": 0,
    "stale": 1,
    "unpinned": 2,
    "unreachable": 3,
    "gone": 4,
    "mismatch": 5,
}
_EXIT = {
    "current": 0,
    "held": 0,
    "stale": ConfigError.exit_code,
    "unpinned": ConfigError.exit_code,
    "unreachable": FetchError.exit_code,
    "gone": FetchError.exit_code,
    "mismatch": IntegrityError.exit_code,
}
_REACH = {
    "pypi": "reach a package index: PIP_INDEX_URL, pip's index-url or --index-url",
    "maven": f"reach a Maven repository: {ENV_MAVEN_URL}, or a <mirror> of central in settings.xml",
    "npm": f"reach an npm registry: {ENV_NPM_REGISTRY}, npm_config_registry or registry= in .npmrc",
}


@dataclass(frozen=True)
class CheckReport:
    statuses: tuple[PinStatus, ...]
    # waivers a newer release would make unnecessary (informational: no state, no exit code)
    waivers: tuple[ObsoleteWaiver, ...] = ()

    @property
    def ok(self) -> bool:
        return all(s.state in ("current", "held") for s in self.statuses)

    @property
    def unchecked(self) -> int:
        return sum(1 for s in self.statuses if s.state == "unreachable")

    @property
    def exit_code(self) -> int:
        """The worst state's: 4 digest mismatch, 3 file gone or registry unreachable, 2 stale
        or unpinned, 0 clean. A pin that could not be checked is not reported clean."""
        return max((_EXIT[s.state] for s in self.statuses), default=0)

    def lines(self) -> list[str]:
        out = []
        for s in self.statuses:
            kind = "" if s.kind == "pypi" else f"{s.kind} "
            version = f" {s.version}" if s.version else ""
            head = f"{s.component}/{s.source}: {kind}{s.project}{version} {s.state}"
            tail = f" — {'; '.join(s.details)}" if s.details else ""
            fix = f" ({s.command})" if s.state not in ("current", "held") else ""
            out.append(head + tail + fix)
        stale = sum(1 for s in self.statuses if s.state not in ("current", "held", "unreachable"))
        total, unchecked = len(self.statuses), self.unchecked
        if unchecked:
            out.append(
                f"{total - unchecked} of {total} pins checked, {stale} need attention; "
                f"{unchecked} could not be checked (registry not configured or not answering: "
                f"exit {FetchError.exit_code} unless a worse finding)"
            )
        else:
            out.append(f"{total} pins checked, {stale} need attention")
        out += [f"waiver: {w.line()}" for w in self.waivers]
        return out

    def to_json(self) -> str:
        return json.dumps(
            {
                "ok": self.ok,
                "exit_code": self.exit_code,
                "unchecked": self.unchecked,
                "statuses": [asdict(s) for s in self.statuses],
                "obsolete_waivers": [
                    {
                        "component": w.component,
                        "version": w.version,
                        "file": w.waiver.file,
                        "manifest": w.waiver.manifest,
                        "entry": w.waiver.entry,
                    }
                    for w in self.waivers
                ],
            },
            indent=2,
        )


def check_pins(project: Project, components: Sequence[str], options: PinOptions) -> CheckReport:
    """Every source of the components (all recipes if none): stale, unpinned, gone, mismatched,
    or unreachable.

    Staleness follows pin's own rule, so a clean pin always checks clean: the component's own
    sources are judged together (the newest release with a file for each of them), the sources
    of any other project together per project (what `--source` would move).

    What each registry is asked, and what it can tell:
    - PyPI: the project page; gone when the pinned file is no longer listed, mismatch when the
      index publishes another sha256, stale when the file is yanked or a release is newer.
    - npm: the package document; gone when the pinned version is absent, mismatch when its
      integrity carries a sha256 other than the pin — or, when the cache holds the pinned
      file, when its sha512/sha1 disagree with the integrity and shasum (the registry's usual
      digests, which say nothing about a SHA-256 otherwise); `dist-tags.latest` is named when
      it is not the newest release.
    - Maven: maven-metadata.xml for the versions, and the pinned file's `.sha1`/`.sha256`
      sidecar (one small GET; a HEAD of the file when neither exists): gone when no repository
      has the file, mismatch when a `.sha256` sidecar differs from the pin or the `.sha1` differs
      from the cached pinned file's. The file itself is never downloaded.
    - a plain URL or a file in the project (no versions, never stale): the URL is asked with a
      HEAD whether the file is still there; the file is hashed against its pin.
    Newer versions: the newest release by the registry's ordering, SNAPSHOTs and pre-releases
    passed over unless the pin is one; `hold = "…"` turns stale into held, as for PyPI.

    A registry that is not configured or does not answer (after the usual retries) is not a
    crash: its sources are reported "unreachable" with the reason, every other source is still
    checked, and a registry that failed once is not asked again in the same run. Exit code:
    the worst state's — 4 mismatch, 3 gone or unreachable, 2 stale or unpinned, 0 clean. An
    unreachable source fails the check (3) because a check that could not look is not a clean
    one: CI must not read "all pins current" from a run that never saw some of them. A CI
    without access to a registry checks the components it can reach (`--check` with a
    component), or reads `unchecked` and the states in the JSON report.
    """
    names = list(components) or sorted(p.stem for p in project.recipes.glob("*.toml"))
    cache = Cache(options.cache_dir or default_cache_dir())
    statuses = []
    waivers = product_waivers(project)
    obsolete: list[ObsoleteWaiver] = []
    with lookups(options, project.root) as ask:
        for name in names:
            sources = load_sources(project.recipes / f"{name}.toml", pinned=False)
            try:
                main: str | None = main_project({sid: project_of(s) for sid, s in sources.items()})
            except ConfigError:
                main = None  # no own project: every group moves with --source
            found: dict[str, PinStatus] = {}
            groups: dict[tuple[str, str], list[Source]] = {}
            for source in sources.values():
                group_key = (source.origin.kind, canonicalize_name(project_of(source)))
                groups.setdefault(group_key, []).append(source)
            for (kind, key), group in groups.items():
                moves = "" if key == main else "".join(f" --source {s.id}" for s in group)
                command = f"invoke pin {name}{moves}"
                if kind == "pypi":
                    found.update(_check_wheels(name, group, ask, command))
                elif kind in VERSIONED:
                    found.update(_check_published(name, group, ask, cache, command))
                else:
                    for source in group:
                        found[source.id] = _check_unversioned(name, source, ask)
            statuses += [found[sid] for sid in sources]  # in the recipe's order
            obsolete += obsolete_waivers(project, name, found, waivers, ask, cache)
    return CheckReport(tuple(statuses), tuple(obsolete))


def _pinning(source: Source) -> tuple[list[str], list[str]]:
    """(states, details) of what the recipe itself lacks."""
    states: list[str] = []
    details: list[str] = []
    if not re.fullmatch(r"[0-9a-f]{64}", source.sha256):
        states.append("unpinned")
        details.append("no sha256")
    if source.size is None:
        states.append("unpinned")
        details.append("no size")
    for level in source.nested:
        if not re.fullmatch(r"[0-9a-f]{64}", level.sha256):
            states.append("unpinned")
            details.append(f"no sha256 for nested {level.member}")
    return states, details


def _status(
    component: str,
    source: Source,
    states: Sequence[str],
    details: Sequence[str],
    newest: str | None,
    command: str,
) -> PinStatus:
    return PinStatus(
        component,
        source.id,
        project_of(source),
        version_of(source.origin),
        source.filename,
        max(states, key=_SEVERITY.__getitem__, default="current"),
        tuple(details),
        newest,
        command,
        source.origin.kind,
    )


def _unreachable(component: str, source: Source, exc: OrtbundleError, where: str) -> PinStatus:
    states, details = _pinning(source)
    reason = exc.message
    if isinstance(exc, FetchError):  # configured, and did not answer
        if project_of(source) not in reason and source.filename not in reason:
            reason += " (so the registry was not asked again)"
        reason += f" [from {where}]" if where else ""
    details.insert(0, f"not checked: {reason}")
    return _status(
        component, source, ["unreachable", *states], details, None, _REACH[source.origin.kind]
    )


def _check_wheels(
    component: str, group: Sequence[Source], ask: Lookups, command: str
) -> dict[str, PinStatus]:
    try:
        files = {s.id: listed_files(ask, s.pypi.project) for s in group}
    except (FetchError, ConfigError) as exc:
        return {s.id: _unreachable(component, s, exc, "") for s in group}
    try:
        newest, skipped = newest_wheels(group, files)
    except FetchError:
        newest, skipped = None, []
    blocked = tuple(n for n in skipped if "no file" in n)
    return {s.id: _check_source(component, s, files[s.id], newest, blocked, command) for s in group}


def _check_source(
    component: str,
    source: Source,
    files: Sequence[Listed],
    newest: Version | None,
    blocked: Sequence[str],
    command: str,
) -> PinStatus:
    states, details = _pinning(source)
    listed = next((f for f in files if f.filename == source.filename), None)
    if listed is None:
        states.append("gone")
        details.append(f"the index no longer lists {source.filename}")
    elif listed.sha256 and source.sha256 and listed.sha256 != source.sha256:
        states.append("mismatch")
        details.append(f"the index publishes sha256 {listed.sha256}")
    elif listed.yanked:
        states.append("stale")
        details.append("the pinned file is yanked")
    pinned = version_or_none(source.pypi.version)
    newer = newest is not None and (pinned is None or newest > pinned)
    if newer and source.hold:
        states.append("held")
        details.append(f"{newest} is out; held: {source.hold}")
    elif newer:
        states.append("stale")
        details.append(f"{newest} is out")
    details += blocked
    return _status(component, source, states, details, str(newest) if newer else None, command)


def _check_published(
    component: str,
    group: Sequence[Source],
    ask: Lookups,
    cache: Cache,
    command: str,
) -> dict[str, PinStatus]:
    """The Maven or npm sources of one project: one registry read, then each pin."""
    kind = group[0].origin.kind
    registry = ask.registry(kind)
    try:
        published = ask.published(group[0])
    except (FetchError, ConfigError) as exc:
        where = ask.where(kind, project_of(group[0]))
        return {s.id: _unreachable(component, s, exc, where) for s in group}
    newest, _skipped = (
        newest_release(registry, published.versions, [version_of(s.origin) for s in group], {})
        if published is not None
        else (None, [])
    )
    out = {}
    for source in group:
        try:
            out[source.id] = _check_one_published(
                component, source, published, newest, ask, cache, command
            )
        except (FetchError, ConfigError) as exc:
            where = ask.where(kind, project_of(source))
            out[source.id] = _unreachable(component, source, exc, where)
    return out


def _check_one_published(
    component: str,
    source: Source,
    published: Published | None,
    newest: str | None,
    ask: Lookups,
    cache: Cache,
    command: str,
) -> PinStatus:
    states, details = _pinning(source)
    origin = source.origin
    registry = ask.registry(origin)
    pinned = version_of(origin)
    listed = published is not None and pinned in published.versions
    if origin.kind == "npm" and not listed:
        states.append("gone")
        details.append(
            f"the registry has no package {project_of(source)}"
            if published is None
            else f"the registry no longer lists {pinned}"
        )
    else:
        digests = ask.digests(source)
        if digests is None:
            states.append("gone")
            details.append(f"no configured repository has {origin.filename}")
        else:
            problem = _mismatch(source, digests, cache)
            if problem:
                states.append("mismatch")
                details.append(problem)
            elif not digests and origin.kind == "maven":
                details.append("published without a .sha1 or .sha256 sidecar")
        if origin.kind == "maven" and published is not None and not listed:
            details.append(f"maven-metadata.xml does not list {pinned}")
    if origin.kind == "maven" and published is None:
        details.append("no maven-metadata.xml: newer versions are not known")
    newer = newest is not None and registry.version_key(newest) > registry.version_key(pinned)
    if newer and source.hold:
        states.append("held")
        details.append(f"{newest} is out; held: {source.hold}")
    elif newer:
        states.append("stale")
        details.append(f"{newest} is out")
    latest = published.latest if published is not None else None
    if origin.kind == "npm" and latest and latest != (newest if newer else pinned):
        details.append(f"dist-tags.latest is {latest}")
    return _status(component, source, states, details, newest if newer else None, command)


def _check_unversioned(component: str, source: Source, ask: Lookups) -> PinStatus:
    """A source no registry versions: a plain URL is asked whether the file is still there (a
    HEAD), a file in the project is hashed against its pin. Neither can be stale."""
    states, details = _pinning(source)
    try:
        digests = ask.digests(source)
    except (FetchError, ConfigError) as exc:
        return _unreachable(component, source, exc, "")
    local = source.origin.kind == "path"
    if digests is None:
        states.append("gone")
        details.append(
            f"{source.origin.path} does not exist"  # type: ignore[union-attr]
            if local
            else f"the server no longer has {source.filename}"
        )
    elif local and re.fullmatch(r"[0-9a-f]{64}", source.sha256):
        actual = next(iter(digests["sha256"]))
        if actual != source.sha256:
            states.append("mismatch")
            details.append(f"{source.origin.path} has sha256 {actual}")  # type: ignore[union-attr]
    return _status(
        component, source, states, details, None, "edit the pin by hand (no versions to move to)"
    )


def _cached_digests(source: Source, cache: Cache, algorithms: Iterable[str]) -> dict[str, str]:
    """The pinned file's digests, when the cache holds it; else nothing (never downloaded)."""
    wanted = sorted(set(algorithms))
    if not wanted or not re.fullmatch(r"[0-9a-f]{64}", source.sha256):
        return {}
    entry = cache.get(source.sha256)
    if entry is None:
        return {}
    hashes = {name: hashlib.new(name) for name in wanted}
    with entry.path.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            for digest in hashes.values():
                digest.update(chunk)
    return {name: digest.hexdigest() for name, digest in hashes.items()}


def _mismatch(source: Source, digests: Digests, cache: Cache) -> str | None:
    """The registry's published digests against the pin: a sha256 against the pin itself, the
    others (sha1, sha512) against the pinned file when the cache holds it (never downloaded)."""
    maven = source.origin.kind == "maven"
    published = dict(digests)
    sha256 = published.pop("sha256", None)
    if sha256 and source.sha256 and source.sha256 not in sha256:
        said = " or ".join(sorted(sha256))
        if maven:
            return f"the repository's .sha256 is {said}, the pinned file's is {source.sha256}"
        return f"the registry's integrity gives sha256 {said}"
    actual = _cached_digests(source, cache, published)
    for name in sorted(actual):
        if actual[name] not in published[name]:
            said = " or ".join(sorted(published[name]))
            if maven:
                return f"the repository's .{name} is {said}, the pinned file's is {actual[name]}"
            return (
                f"the registry publishes {name} {said}, the cached pinned file's is {actual[name]}"
            )
    return None
