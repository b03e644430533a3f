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

from ortbundle.errors import ConfigError, FetchError, IntegrityError
from ortbundle.fetch.config import (
    MavenRepository,
    parse_xml,
    redact,
    split_credentials,
    xml_child,
    xml_children,
    xml_text,
)
from ortbundle.fetch.download import (
    Downloaded,
    NotFound,
    ProgressFn,
    check_published,
    download,
    request_with_retries,
)
from ortbundle.fetch.policy import RetryPolicy
from ortbundle.locations import ENV_MAVEN_URL
from ortbundle.recipes import MavenCoordinates, Source

# The sidecars looked for, in order, with their hex length. Maven Central always has .sha1;
# .sha256 is optional, and only consulted when .sha1 is missing.
SIDECARS = (("sha1", 40), ("sha256", 64))
_FIX = f"check {ENV_MAVEN_URL} or the <mirror> of central in settings.xml"


@dataclass(frozen=True)
class MavenFetched:
    url: str  # the artifact URL that served the bytes (credentials never in it)
    repository: MavenRepository
    downloaded: Downloaded
    sidecar: str | None  # the digest cross-checked ("sha1", "sha256"), None if none published


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


def fetch_maven(
    session: requests.Session,
    repositories: Sequence[MavenRepository],
    source: Source,
    partial: Path,
    policy: RetryPolicy,
    *,
    progress: ProgressFn | None = None,
    warn: Callable[[str], None],
) -> MavenFetched:
    """Download the pinned artifact from the first repository that has it into `partial`,
    verified against the pin and the repository's sidecar; `warn` hears when there is none."""
    coords = source.origin
    if not isinstance(coords, MavenCoordinates):
        raise ConfigError(f"source {source.id} is {coords.describe()}, not a Maven artifact")
    what = coords.filename
    looked: list[str] = []
    for repository in repositories:
        url = artifact_url(repository.url, coords)
        sidecar = sidecar_digest(session, url, repository, policy, what)
        if sidecar is not None and sidecar[0] == "sha256" and sidecar[1] != source.sha256:
            raise IntegrityError(
                f"the repository publishes sha256 {sidecar[1]} for this file, "
                f"but the recipe pins {source.sha256}",
                file=redact(url),
                fix="find out which is right before building; re-pin with `invoke pin` only if "
                "the upstream release really changed",
            )
        try:
            done = download(
                session,
                url,
                partial,
                sha256=source.sha256,
                expected_size=source.size,
                policy=policy,
                what=what,
                progress=progress,
                headers=repository.headers,
                digests=(sidecar[0],) if sidecar else (),
            )
        except NotFound:
            looked.append(f"{repository.describe()}: not there")
            continue
        if sidecar is None:
            warn(
                f"{coords.describe()}: {repository.url} publishes no .sha1 or .sha256 beside "
                "it; only the recipe's SHA-256 pin vouches for these bytes"
            )
        else:
            check_published(
                done,
                {sidecar[0]: (sidecar[1],)},
                what=what,
                url=url,
                by=f"the repository's .{sidecar[0]} sidecar",
            )
        return MavenFetched(url, repository, done, sidecar[0] if sidecar else None)
    raise NotFound(
        f"{coords.describe()} is not in the configured Maven repositories: {'; '.join(looked)}",
        file=coords.filename,
        fix=f"check the pin's coordinates, or {_FIX}",
    )


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
