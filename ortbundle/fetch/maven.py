"""Maven repositories: a pinned artifact at `<repo>/<group path>/<artifact>/<version>/<file>`,
cross-checked while it downloads against the digest the repository publishes beside it.

Our SHA-256 pin is the guarantee; the `.sha1` (or `.sha256`) sidecar is the repository's own
word, and a repository that contradicts itself is not one to take bytes from. Several
repositories (ORTBUNDLE_MAVEN_URL) are tried in order; only "not there" moves on to the next.
An https repository stays https: download.py refuses a redirect that downgrades it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import requests

from ortbundle._core.errors import FetchError
from ortbundle._core.locations import ENV_MAVEN_URL
from ortbundle.config.retry import RetryPolicy
from ortbundle.config.sources import Coordinates, MavenCoordinates
from ortbundle.fetch.config.maven import MavenRepository
from ortbundle.fetch.config.urls import redact, split_credentials
from ortbundle.fetch.config.xmldoc import parse_xml, xml_child, xml_children, xml_text
from ortbundle.fetch.download import ProgressFn, check_published, download
from ortbundle.fetch.http import NotFound, exists, request_with_retries
from ortbundle.fetch.registry import Fetched, Location, Published, RegistryBase, _ignore
from ortbundle.fetch.trust import Voice, only_the_pin, reconcile

# The sidecars looked for, in order, with their hex length. Maven Central always has .sha1;
# .sha256 is optional, and only consulted when .sha1 is missing.
SIDECARS = (("sha1", 40), ("sha256", 64))
_FIX = f"check {ENV_MAVEN_URL} or the <mirror> of central in settings.xml"


@dataclass(frozen=True)
class MavenMetadata:
    versions: tuple[str, ...]  # as the repositories list them (oldest first), merged
    release: str | None
    latest: str | None


def artifact_url(repository_url: str, coords: MavenCoordinates) -> str:
    return f"{repository_url.rstrip('/')}/{coords.directory}/{coords.filename}"


def _as_repository(repository: MavenRepository | str) -> MavenRepository:
    if isinstance(repository, MavenRepository):
        return repository
    url, auth = split_credentials(repository)
    return MavenRepository(url, id=redact(url), origin="given", auth=auth)


def sidecar_digest(
    session: requests.Session,
    url: str,
    repository: MavenRepository,
    policy: RetryPolicy,
    what: str,
) -> tuple[str, str] | None:
    """(algorithm, hex) from the first sidecar the repository has, or None if it has neither.
    A sidecar holds "hex" or "hex  filename"."""
    for algorithm, length in SIDECARS:
        sidecar_url = f"{url}.{algorithm}"
        response = request_with_retries(
            session,
            sidecar_url,
            policy,
            headers=repository.headers,
            what=f"{what}.{algorithm}",
            allow_404=True,
            fix=_FIX,
        )
        if response is None:
            continue
        found = re.search(rf"(?<![0-9a-fA-F])[0-9a-fA-F]{{{length}}}(?![0-9a-fA-F])", response.text)
        if found is None:
            raise FetchError(
                f"{what}: the repository's .{algorithm} file holds no {algorithm} digest",
                file=redact(sidecar_url),
                fix="the repository serves something else at the sidecar's URL; fix the mirror",
            )
        return algorithm, found.group(0).lower()
    return None


def maven_metadata(
    session: requests.Session,
    repositories: Sequence[MavenRepository | str],
    group: str,
    artifact: str,
    policy: RetryPolicy,
) -> MavenMetadata:
    """The versions every repository's maven-metadata.xml lists, merged (for `invoke pin`)."""
    versions: list[str] = []
    release = latest = None
    looked: list[str] = []
    found = False
    for given in repositories:
        repository = _as_repository(given)
        url = (
            f"{repository.url.rstrip('/')}/{group.replace('.', '/')}/{artifact}/maven-metadata.xml"
        )
        response = request_with_retries(
            session,
            url,
            policy,
            headers=repository.headers,
            what=f"maven-metadata.xml of {group}:{artifact}",
            allow_404=True,
            fix=_FIX,
        )
        if response is None:
            looked.append(f"{repository.url}: no maven-metadata.xml")
            continue
        root = parse_xml(
            response.content, what="maven-metadata.xml", file=redact(url), error=FetchError
        )
        for field_name, wanted in (("groupId", group), ("artifactId", artifact)):
            said = xml_text(root, field_name)
            if said and said != wanted:
                raise FetchError(
                    f"maven-metadata.xml for {group}:{artifact} says {field_name} {said}",
                    file=redact(url),
                    fix="the repository serves another artifact's metadata; fix the mirror",
                )
        found = True
        versioning = xml_child(root, "versioning")
        for element in xml_children(xml_child(versioning, "versions"), "version"):
            version = (element.text or "").strip()
            if version and version not in versions:
                versions.append(version)
        release = release or xml_text(versioning, "release") or None
        latest = latest or xml_text(versioning, "latest") or None
    if not found:
        raise NotFound(
            f"no repository has metadata for {group}:{artifact}: {'; '.join(looked)}",
            file=f"{group}:{artifact}",
            fix=f"check the group and artifact, or {_FIX}",
        )
    versions += [v for v in dict.fromkeys((release, latest)) if v and v not in versions]
    return MavenMetadata(tuple(versions), release, latest)


def maven_versions(
    session: requests.Session,
    repo_urls: Sequence[MavenRepository | str],
    group: str,
    artifact: str,
    policy: RetryPolicy,
) -> list[str]:
    """The published versions of group:artifact, `<release>` and `<latest>` included."""
    return list(maven_metadata(session, repo_urls, group, artifact, policy).versions)


# --- version order -----------------------------------------------------------------------------

# Maven orders qualifiers alpha < beta < milestone < rc < snapshot < (release) < sp; an unknown
# qualifier sorts after the release, as Maven's ComparableVersion has it.
_QUALIFIERS = {
    "alpha": 1,
    "a": 1,
    "beta": 2,
    "b": 2,
    "milestone": 3,
    "m": 3,
    "rc": 4,
    "cr": 4,
    "snapshot": 5,
    "": 6,
    "ga": 6,
    "final": 6,
    "release": 6,
    "sp": 7,
}
_PRE_WORDS = frozenset(
    {"alpha", "a", "beta", "b", "milestone", "m", "rc", "cr", "snapshot", "preview", "pre"}
    | {"dev", "ea", "eap", "nightly", "canary", "next"}
)
_HEAD = re.compile(r"^(\d+(?:\.\d+)*)[.-]?(.*)$")
_QUALIFIER = re.compile(r"^([a-z]*)[.-]?(\d*)")

MavenKey = tuple[int, tuple[int, ...], float, int, str]


def maven_key(version: str) -> MavenKey:
    """Order Maven versions the way Maven does for the usual shapes (1.2.3, 1.2.3-rc1,
    1.2.3.20250101, 1.2-SNAPSHOT); anything else sorts first, by text."""
    head = _HEAD.match(version)
    if head is None:
        return (0, (), 0.0, 0, version)
    numbers = [int(p) for p in head[1].split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()  # 1.0 == 1.0.0
    rest = head[2].lower()
    qualifier = _QUALIFIER.match(rest)
    word, number = (qualifier[1], qualifier[2]) if qualifier else ("", "")
    rank = float(_QUALIFIERS.get(word, 6.5))
    return (1, tuple(numbers), rank, int(number or 0), rest)


def is_prerelease(version: str) -> bool:
    """A SNAPSHOT or a pre-release-looking version (alpha, beta, milestone, rc, preview, …)."""
    rest = version.lower()
    head = _HEAD.match(rest)
    words = re.findall(r"[a-z]+", head[2] if head else rest)
    return "snapshot" in rest or any(w in _PRE_WORDS for w in words)


def repository_voice(url: str) -> Voice:
    """How one repository refuses a pin its .sha256 sidecar contradicts. An unpinned file it has
    no sidecar for is not refused here: the next repository may have one."""
    return Voice(
        file=redact(url),
        contradicts="the repository publishes sha256 {published} for this file",
    )


def unvouched_voice(coords: MavenCoordinates, looked: Sequence[str]) -> Voice:
    """How an unpinned artifact is refused once no repository served it with a sidecar."""
    return Voice(
        file=coords.filename,
        unvouched=f"{coords.describe()}: no configured repository publishes it with a digest "
        f"({'; '.join(looked)})",
        fix="check the version (is it in maven-metadata.xml?) or the repository",
        refused=FetchError,
    )


# --- the registry ------------------------------------------------------------------------------


class MavenRegistry(RegistryBase[MavenCoordinates]):
    """The repositories Maven's own settings pick (config/maven.py), tried in order."""

    coordinates = MavenCoordinates
    describes = "a Maven artifact"
    kind = "maven"

    def where(self, project: str) -> str:
        return "; ".join(r.origin for r in self.registries.maven()[0].repositories)

    def endpoint(self, project: str) -> str:
        return "maven " + " ".join(r.url for r in self.registries.maven()[0].repositories)

    def resolve(self, coords: Coordinates) -> Location:
        """The first repository that has the file by its sidecar, with the digest it publishes;
        when none has a sidecar, the first that has the file itself (no digests)."""
        coords = self.own(coords)
        config, session = self.registries.maven()
        for repository in config.repositories:
            url = artifact_url(repository.url, coords)
            found = sidecar_digest(session, url, repository, self.policy, coords.filename)
            if found is not None:
                return Location(url, {found[0]: frozenset({found[1]})})
        for repository in config.repositories:
            url = artifact_url(repository.url, coords)
            if exists(session, url, self.policy, headers=repository.headers, what=coords.filename):
                return Location(url, {})
        raise NotFound(
            f"no configured repository has {coords.filename}",
            file=coords.filename,
            fix=f"check the pin's coordinates, or {_FIX}",
        )

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
        """From the first repository that has the file, checked against the pin and the
        repository's sidecar; `warn` hears when there is none. Not pinned yet
        (`expected_sha256` None): only a repository with a sidecar is trusted."""
        coords = self.own(coords)
        config, session = self.registries.maven()
        what = coords.filename
        looked: list[str] = []
        for repository in config.repositories:
            url = artifact_url(repository.url, coords)
            sidecar = sidecar_digest(session, url, repository, self.policy, what)
            published = {sidecar[0]: frozenset({sidecar[1]})} if sidecar else {}
            vouching = reconcile(expected_sha256, published, repository_voice(url))
            if vouching is None:  # not pinned, and this repository has no sidecar for it
                looked.append(f"{repository.origin}: no .sha1 or .sha256 for it")
                continue
            try:
                done = download(
                    session,
                    url,
                    partial,
                    sha256=expected_sha256,
                    expected_size=size,
                    policy=self.policy,
                    what=what,
                    progress=progress,
                    headers=repository.headers,
                    digests=tuple(vouching),
                )
            except NotFound:
                looked.append(
                    f"{repository.describe()}: not there"
                    if expected_sha256
                    else f"{repository.origin}: a sidecar but no file"
                )
                continue
            if sidecar is None:
                warn(
                    only_the_pin(
                        f"{coords.describe()}: {repository.url} publishes no .sha1 or .sha256 "
                        "beside it"
                    )
                )
            else:
                by = f"the repository's .{sidecar[0]} sidecar"
                check_published(done, vouching, what=what, url=url, by=by)
            return Fetched(url, done)
        # every repository asked, and none served it with a sidecar: refused if not pinned
        reconcile(expected_sha256, {}, unvouched_voice(coords, looked))
        raise NotFound(
            f"{coords.describe()} is not in the configured Maven repositories: {'; '.join(looked)}",
            file=coords.filename,
            fix=f"check the pin's coordinates, or {_FIX}",
        )

    def versions(self, project: str) -> Published | None:
        group, _, artifact = project.partition(":")
        config, session = self.registries.maven()
        try:
            metadata = maven_metadata(session, config.repositories, group, artifact, self.policy)
        except NotFound:
            return None
        return Published(tuple(sorted(metadata.versions, key=maven_key)), metadata.release)

    def version_key(self, version: str) -> MavenKey:
        return maven_key(version)

    def is_prerelease(self, version: str) -> bool:
        return is_prerelease(version)
