"""The trust rule (fetch/trust.py) in each registry's own words, without a server.

The expected messages are the registries' wording before the rule was shared, verbatim: a
user, a test or a script matching on them sees no change. Each registry's cases: a published
sha256 that matches the pin, one that contradicts it, nothing published (pinned: the pin alone
vouches; not pinned: refused), and what it publishes but does not check.
"""

from __future__ import annotations

from collections.abc import Collection

import pytest

from ortbundle._core.errors import FetchError, IntegrityError, OrtbundleError
from ortbundle.config.sources import (
    MavenCoordinates,
    NpmCoordinates,
    PypiCoordinates,
    UrlCoordinates,
)
from ortbundle.fetch import index, maven, npm, url
from ortbundle.fetch.registry import Digests
from ortbundle.fetch.trust import Voice, only_the_pin, reconcile

PIN = "a" * 64
OTHER = "b" * 64
THIRD = "c" * 64
SHA1 = "d" * 40
SHA512 = "e" * 128
RECHECK = (
    "find out which is right before building; re-pin with `invoke pin` only if the upstream "
    "release really changed"
)

WHEEL = PypiCoordinates("acme", "1.0", "acme-1.0-py3-none-any.whl")
AAR = MavenCoordinates("com.example", "ort", "1.0")
AAR_URL = "http://127.0.0.1:1/repo/com/example/ort/1.0/ort-1.0.aar"
TARBALL = NpmCoordinates("ort-web", "1.0.0")
MODEL = UrlCoordinates("http://127.0.0.1:1/models/m.onnx")


def refused(
    pin: str | None, published: Digests, voice: Voice, checks: Collection[str] | None = None
) -> OrtbundleError:
    with pytest.raises(OrtbundleError) as caught:
        reconcile(pin, published, voice, checks=checks)
    return caught.value


def said(error: OrtbundleError) -> tuple[type[OrtbundleError], int, str]:
    return type(error), error.exit_code, str(error)


# ---- PyPI: only the sha256 counts --------------------------------------------------------------


def test_pypi_a_matching_sha256_vouches() -> None:
    published = {"sha256": frozenset({PIN}), "md5": frozenset({"f" * 32})}
    assert reconcile(PIN, published, index.voice(WHEEL), checks={"sha256"}) == {
        "sha256": frozenset({PIN})
    }
    assert reconcile(None, published, index.voice(WHEEL), checks={"sha256"}) == {
        "sha256": frozenset({PIN})
    }


def test_pypi_a_contradicting_sha256_is_refused() -> None:
    error = refused(PIN, {"sha256": frozenset({OTHER})}, index.voice(WHEEL), checks={"sha256"})
    assert said(error) == (
        IntegrityError,
        4,
        f"the index publishes sha256 {OTHER} for this file, but the recipe pins {PIN} "
        f"[file acme-1.0-py3-none-any.whl] — fix: {RECHECK}",
    )


@pytest.mark.parametrize("published", [{}, {"md5": frozenset({"f" * 32})}])
def test_pypi_unpinned_without_a_sha256_is_refused(published: Digests) -> None:
    """An md5 (or any digest but the sha256) is never computed: it vouches for nothing."""
    error = refused(None, published, index.voice(WHEEL), checks={"sha256"})
    assert said(error) == (
        IntegrityError,
        4,
        "the index publishes no sha256 for acme-1.0-py3-none-any.whl; pin does not trust a "
        "download it cannot check [file acme-1.0-py3-none-any.whl] — fix: use an index that "
        "publishes digests (PEP 503 #sha256= or PEP 691 hashes)",
    )


def test_pypi_a_pin_alone_is_trusted() -> None:
    assert reconcile(PIN, {}, index.voice(WHEEL), checks={"sha256"}) == {}
    md5 = {"md5": frozenset({"f" * 32})}
    assert reconcile(PIN, md5, index.voice(WHEEL), checks={"sha256"}) == {}


# ---- Maven: one repository's sidecar, then the sum over all of them --------------------------


@pytest.mark.parametrize("sidecar", [{"sha1": frozenset({SHA1})}, {"sha256": frozenset({PIN})}])
def test_maven_a_sidecar_vouches(sidecar: Digests) -> None:
    assert reconcile(PIN, sidecar, maven.repository_voice(AAR_URL)) == sidecar
    assert reconcile(None, sidecar, maven.repository_voice(AAR_URL)) == sidecar


def test_maven_a_contradicting_sha256_sidecar_is_refused() -> None:
    error = refused(PIN, {"sha256": frozenset({OTHER})}, maven.repository_voice(AAR_URL))
    assert said(error) == (
        IntegrityError,
        4,
        f"the repository publishes sha256 {OTHER} for this file, but the recipe pins {PIN} "
        f"[file {AAR_URL}] — fix: {RECHECK}",
    )


def test_maven_without_a_sidecar_the_next_repository_is_asked() -> None:
    assert reconcile(None, {}, maven.repository_voice(AAR_URL)) is None


def test_maven_unpinned_and_no_repository_vouches_is_a_fetch_failure() -> None:
    looked = ["first: no .sha1 or .sha256 for it", "second: a sidecar but no file"]
    error = refused(None, {}, maven.unvouched_voice(AAR, looked))
    assert said(error) == (
        FetchError,
        3,
        "maven:com.example:ort:1.0@aar: no configured repository publishes it with a digest "
        "(first: no .sha1 or .sha256 for it; second: a sidecar but no file); pin does not "
        "trust a download nothing vouches for [file ort-1.0.aar] — fix: check the version "
        "(is it in maven-metadata.xml?) or the repository",
    )


def test_maven_a_pin_alone_is_trusted() -> None:
    assert reconcile(PIN, {}, maven.repository_voice(AAR_URL)) == {}
    assert reconcile(PIN, {}, maven.unvouched_voice(AAR, [])) == {}


# ---- npm: every integrity digest and the shasum count -----------------------------------------


def test_npm_any_published_digest_vouches() -> None:
    published = {"sha512": frozenset({SHA512}), "sha1": frozenset({SHA1})}
    assert reconcile(None, published, npm.voice(TARBALL)) == published
    both = {"sha256": frozenset({OTHER, PIN})}  # SRI may list several
    assert reconcile(PIN, both, npm.voice(TARBALL)) == both


def test_npm_a_contradicting_integrity_is_refused() -> None:
    error = refused(PIN, {"sha256": frozenset({THIRD, OTHER})}, npm.voice(TARBALL))
    assert said(error) == (
        IntegrityError,
        4,
        f"the registry's integrity gives sha256 {OTHER} or {THIRD}, but the recipe pins {PIN} "
        f"[file npm:ort-web@1.0.0] — fix: {RECHECK}",
    )


def test_npm_unpinned_without_integrity_or_shasum_is_refused() -> None:
    error = refused(None, {}, npm.voice(TARBALL))
    assert said(error) == (
        IntegrityError,
        4,
        "npm:ort-web@1.0.0: the registry publishes no integrity or shasum for it; pin does not "
        "trust a download nothing vouches for [file ort-web-1.0.0.tgz] — fix: use a registry "
        "that publishes dist.integrity, or pin by hand",
    )


def test_npm_a_pin_alone_is_trusted() -> None:
    assert reconcile(PIN, {}, npm.voice(TARBALL)) == {}


# ---- a plain URL publishes nothing ------------------------------------------------------------


def test_url_unpinned_is_refused() -> None:
    error = refused(None, {}, url.voice(MODEL))
    assert said(error) == (
        IntegrityError,
        4,
        f"{MODEL.url} publishes no digest; pin does not trust a download nothing vouches for "
        f"[file {MODEL.url}] — fix: pin its sha256 by hand",
    )


def test_url_a_pin_alone_is_trusted() -> None:
    assert reconcile(PIN, {}, url.voice(MODEL)) == {}


def test_a_published_sha256_without_words_to_refuse_it_is_a_bug_not_a_pass() -> None:
    with pytest.raises(ValueError, match="no words"):
        reconcile(PIN, {"sha256": frozenset({OTHER})}, url.voice(MODEL))


def test_the_pin_only_warning() -> None:
    assert only_the_pin("x: y publishes no .sha1 or .sha256 beside it") == (
        "x: y publishes no .sha1 or .sha256 beside it; only the recipe's SHA-256 pin vouches "
        "for these bytes"
    )
