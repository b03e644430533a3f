"""npm registries: a pinned package version's tarball, found through its package document.

The registry publishes an SRI `integrity` (sha512, usually) and a sha1 `shasum` for every
tarball; both are computed while the tarball downloads and must agree with the bytes, on top of
our SHA-256 pin. Credentials (`//host/path/:_authToken`) go only to URLs under their prefix.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import requests

from ortbundle._core.errors import FetchError
from ortbundle._core.locations import ENV_NPM_REGISTRY
from ortbundle.config.retry import RetryPolicy
from ortbundle.config.sources import Coordinates, NpmCoordinates
from ortbundle.fetch.config.npm import NpmConfig
from ortbundle.fetch.config.urls import redact
from ortbundle.fetch.download import ProgressFn, check_published, download
from ortbundle.fetch.http import DIGESTS, NotFound, request_with_retries
from ortbundle.fetch.registry import Fetched, Location, Published, RegistryBase, _ignore
from ortbundle.fetch.trust import Voice, only_the_pin, reconcile

# The abbreviated ("corgi") document is much smaller and carries everything an install needs.
ACCEPT = "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*"
_FIX = f"check {ENV_NPM_REGISTRY}, npm_config_registry or registry= in .npmrc"
_SEMVER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")

SemverKey = tuple[int, tuple[int, int, int], int, tuple[tuple[int, int, str], ...], str]


@dataclass(frozen=True)
class NpmDist:
    """What the registry says about one version's tarball."""

    tarball: str  # absolute URL
    integrity: dict[str, frozenset[str]]  # algorithm → hex digests (SRI may list several)
    shasum: str | None  # sha1 hex

    @property
    def digests(self) -> dict[str, frozenset[str]]:
        """Everything published for the tarball: the integrity's digests and the shasum."""
        found = dict(self.integrity)
        if self.shasum:
            found["sha1"] = found.get("sha1", frozenset()) | {self.shasum}
        return found


def packument_url(registry: str, package: str) -> str:
    """`<registry>/<name>`, a scoped name sent as `@scope%2fname` as npm sends it."""
    name = package.replace("/", "%2f") if package.startswith("@") else package
    return f"{registry.rstrip('/')}/{quote(name, safe='@%')}"


def semver_key(version: str) -> SemverKey:
    """Order versions as semver does (a pre-release before its release); unparsable first."""
    match = _SEMVER.match(version)
    if match is None:
        return (0, (0, 0, 0), 0, (), version)
    major, minor, patch, pre = match.groups()
    pre_key = tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in (pre or "").split(".")
    )
    return (
        1,
        (int(major), int(minor), int(patch)),
        0 if pre else 1,
        pre_key if pre else (),
        version,
    )


def parse_integrity(value: str, *, file: str) -> dict[str, frozenset[str]]:
    """An SRI string ("sha512-<base64> sha1-<base64>?opt") as algorithm → hex digests.
    Algorithms we cannot compute are skipped, as SRI says to."""
    found: dict[str, set[str]] = {}
    for token in value.split():
        algorithm, _, rest = token.partition("-")
        if algorithm not in DIGESTS or not rest:
            continue
        try:
            raw = base64.b64decode(rest.split("?", 1)[0], validate=True)
        except (binascii.Error, ValueError):
            raise FetchError(
                f"the registry's integrity {token!r} is not valid base64",
                file=file,
                fix="the registry serves a corrupt package document; fix the mirror",
            ) from None
        found.setdefault(algorithm, set()).add(raw.hex())
    return {name: frozenset(values) for name, values in found.items()}


def _document(
    session: requests.Session,
    url: str,
    package: str,
    policy: RetryPolicy,
    headers: Mapping[str, str],
    registry: str,
) -> dict[str, Any]:
    response = request_with_retries(
        session,
        url,
        policy,
        headers={"Accept": ACCEPT, **headers},
        what=f"npm package document of {package}",
        allow_404=True,
        fix=_FIX,
    )
    if response is None:
        raise NotFound(
            f"{package} is not in the npm registry {redact(registry)}",
            file=package,
            fix=f"check the package name, or {_FIX}",
        )
    try:
        data = json.loads(response.content)
    except ValueError as exc:
        raise FetchError(
            f"the package document of {package} is not JSON ({exc})",
            file=redact(url),
            fix="the registry URL may point at a web page, not a registry; " + _FIX,
        ) from None
    if not isinstance(data, dict):
        raise FetchError(f"the package document of {package} is not an object", file=redact(url))
    return data


def _versions(document: Mapping[str, Any], url: str) -> dict[str, Any]:
    versions = document.get("versions", {})
    if not isinstance(versions, dict):
        raise FetchError("the package document's versions are not an object", file=redact(url))
    return versions


def _dist_tags(document: Mapping[str, Any]) -> dict[str, str]:
    tags = document.get("dist-tags", {})
    if not isinstance(tags, dict):
        return {}
    return {str(k): str(v) for k, v in tags.items() if isinstance(v, str)}


def _nearby(versions: list[str], wanted: str, count: int = 3) -> list[str]:
    ordered = sorted(versions, key=semver_key)
    at = bisect.bisect_left([semver_key(v) for v in ordered], semver_key(wanted))
    return ordered[max(0, at - count) : at + count]


def _dist(entry: object, url: str) -> NpmDist:
    dist = entry.get("dist") if isinstance(entry, dict) else None
    tarball = dist.get("tarball") if isinstance(dist, dict) else None
    if not isinstance(dist, dict) or not isinstance(tarball, str) or not tarball:
        raise FetchError(
            "the package document names no tarball for this version",
            file=redact(url),
            fix="the registry serves a corrupt package document; fix the mirror",
        )
    integrity = dist.get("integrity")
    shasum = dist.get("shasum")
    if isinstance(shasum, str) and not re.fullmatch(r"[0-9a-fA-F]{40}", shasum):
        raise FetchError(
            f"the registry's shasum {shasum!r} is not a sha1 digest",
            file=redact(url),
            fix="the registry serves a corrupt package document; fix the mirror",
        )
    return NpmDist(
        tarball=urljoin(url, tarball),
        integrity=parse_integrity(integrity, file=redact(url))
        if isinstance(integrity, str)
        else {},
        shasum=shasum.lower() if isinstance(shasum, str) else None,
    )


def resolve_npm(
    session: requests.Session,
    config: NpmConfig,
    coords: NpmCoordinates,
    policy: RetryPolicy,
) -> tuple[str, NpmDist]:
    """The registry and the `dist` record of the pinned version; refuse an https registry
    that links its tarball over http."""
    registry, origin = config.registry_for(coords.package)
    url = packument_url(registry, coords.package)
    document = _document(session, url, coords.package, policy, config.headers_for(url), registry)
    versions = _versions(document, url)
    if coords.version not in versions:
        near = _nearby(list(versions), coords.version)
        latest = _dist_tags(document).get("latest")
        listed = ", ".join(near) if near else "none at all"
        raise NotFound(
            f"{coords.package} has no version {coords.version} in {redact(registry)} "
            f"({origin}); nearest published: {listed}" + (f"; latest {latest}" if latest else ""),
            file=coords.describe(),
            fix="check the pin's version (`invoke pin` moves it to a published one)",
        )
    dist = _dist(versions[coords.version], url)
    if urlsplit(registry).scheme == "https" and urlsplit(dist.tarball).scheme != "https":
        raise FetchError(
            f"the https registry links {coords.describe()} over "
            f"{urlsplit(dist.tarball).scheme or 'a relative'} URL {redact(dist.tarball)}",
            file=coords.filename,
            fix="the registry downgrades the download; use a registry or mirror that links "
            "tarballs over https, or configure it as http explicitly if that is intended",
        )
    return registry, dist


def npm_versions(
    session: requests.Session,
    registry: str,
    package: str,
    policy: RetryPolicy,
    *,
    headers: Mapping[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The published versions (semver order, oldest first) and dist-tags, for `invoke pin`.
    `headers`: credentials, e.g. `NpmConfig.headers_for(packument_url(registry, package))`."""
    url = packument_url(registry, package)
    document = _document(session, url, package, policy, headers or {}, registry)
    return sorted(_versions(document, url), key=semver_key), _dist_tags(document)


def is_prerelease(version: str) -> bool:
    """Unparsable, or a semver pre-release (`-tag`)."""
    key = semver_key(version)
    return key[0] == 0 or key[2] == 0


def voice(coords: NpmCoordinates) -> Voice:
    """How the registry refuses a pin its integrity contradicts, or an unpinned tarball it
    publishes no integrity or shasum for."""
    return Voice(
        file=coords.filename,
        contradicts="the registry's integrity gives sha256 {published}",
        contradicted_file=coords.describe(),
        unvouched=f"{coords.describe()}: the registry publishes no integrity or shasum for it",
        fix="use a registry that publishes dist.integrity, or pin by hand",
    )


class NpmRegistry(RegistryBase[NpmCoordinates]):
    """The registry npm's own configuration gives each package (config/npm.py)."""

    coordinates = NpmCoordinates
    describes = "an npm package"
    kind = "npm"

    def where(self, project: str) -> str:
        return self.registries.npm()[0].registry_for(project)[1]

    def endpoint(self, project: str) -> str:
        return "npm " + self.registries.npm()[0].registry_for(project)[0]

    def dist(self, coords: Coordinates) -> tuple[str, NpmDist]:
        config, session = self.registries.npm()
        return resolve_npm(session, config, self.own(coords), self.policy)

    def resolve(self, coords: Coordinates) -> Location:
        _registry, dist = self.dist(coords)
        return Location(dist.tarball, dist.digests)

    def download(
        self,
        coords: Coordinates,
        expected_sha256: str | None,
        partial: Path,
        *,
        size: int | None = None,
        progress: ProgressFn | None = None,
        warn: Callable[[str], None] = _ignore,
    ) -> Fetched:
        """The tarball, verified against the pin and against the registry's integrity and
        shasum; `warn` hears when the registry publishes neither. Not pinned yet
        (`expected_sha256` None): refused when the registry publishes neither."""
        coords = self.own(coords)
        config, session = self.registries.npm()
        registry, dist = self.dist(coords)
        vouching = reconcile(expected_sha256, dist.digests, voice(coords))
        done = download(
            session,
            dist.tarball,
            partial,
            sha256=expected_sha256,
            expected_size=size,
            policy=self.policy,
            what=coords.filename,
            progress=progress,
            headers=config.headers_for(dist.tarball),
            digests=sorted(set(dist.digests) - {"sha256"}),
        )
        what, url = coords.filename, dist.tarball
        if dist.integrity:
            check_published(done, dist.integrity, what=what, url=url, by="the registry's integrity")
        if dist.shasum:
            check_published(
                done, {"sha1": (dist.shasum,)}, what=what, url=url, by="the registry's shasum"
            )
        if not vouching:
            warn(
                only_the_pin(
                    f"{coords.describe()}: {redact(registry)} publishes no integrity or shasum "
                    "for it"
                )
            )
        return Fetched(dist.tarball, done)

    def versions(self, project: str) -> Published | None:
        config, session = self.registries.npm()
        registry, _origin = config.registry_for(project)
        headers = config.headers_for(packument_url(registry, project))
        try:
            versions, tags = npm_versions(session, registry, project, self.policy, headers=headers)
        except NotFound:
            return None
        return Published(tuple(versions), tags.get("latest"))

    def version_key(self, version: str) -> SemverKey:
        return semver_key(version)

    def is_prerelease(self, version: str) -> bool:
        return is_prerelease(version)
