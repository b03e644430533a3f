"""The one rule between a pin and the digests a registry publishes for the pinned file.

A published sha256 other than the pin is refused before a byte is downloaded: the two cannot
both be right, and only a person can tell which is. A file not pinned yet (`invoke pin`) is
downloaded only when the registry publishes a digest the download is checked against: nothing
else vouches for its bytes. Each registry says both refusals in its own words (a `Voice`), so
a user still reads "the index", "the repository" or "the registry's integrity".
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ortbundle._core.errors import IntegrityError, OrtbundleError
from ortbundle.fetch.registry import Digests

RECHECK = (
    "find out which is right before building; re-pin with `invoke pin` only if the upstream "
    "release really changed"
)


@dataclass(frozen=True)
class Voice:
    """One registry's words for the two refusals; `reconcile` says the rest of each sentence."""

    file: str  # the file a refusal names
    # a pin the registry contradicts: "the index publishes sha256 {published} for this file",
    # {published} the published value(s); None: the registry publishes no sha256 (a plain URL)
    contradicts: str | None = None
    contradicted_file: str | None = None  # the file that refusal names, when not `file`
    # an unpinned file nothing vouches for: "the index publishes no sha256 for x.whl"; None:
    # not refused here, the caller asks elsewhere first (Maven's next repository)
    unvouched: str | None = None
    fix: str = ""  # what to do about an unpinned file nothing vouches for
    # the end of "pin does not trust a download …": an index may list digests pin never computes
    # (md5), so for PyPI it is "it cannot check"
    why: str = "nothing vouches for"
    # Maven's refusal sums up every repository, some of which lacked the file: a fetch failure
    refused: type[OrtbundleError] = IntegrityError


def reconcile(
    pin: str | None,
    published: Digests,
    voice: Voice,
    *,
    checks: Collection[str] | None = None,
) -> Digests | None:
    """The published digests that vouch for the bytes besides the pin ({}: only the pin does).

    `checks` are the algorithms the caller verifies the download against (None: every one it
    publishes); a digest it does not check vouches for nothing. Raises IntegrityError when a
    published sha256 contradicts `pin`, and `voice.refused` when there is no pin and nothing
    vouches; None instead of that refusal when `voice.unvouched` is None."""
    sha256 = published.get("sha256", frozenset())
    if pin is not None and sha256 and pin not in sha256:
        if voice.contradicts is None:
            raise ValueError(f"{voice.file}: a sha256 is published, but no words to refuse it")
        said = voice.contradicts.format(published=" or ".join(sorted(sha256)))
        raise IntegrityError(
            f"{said}, but the recipe pins {pin}",
            file=voice.contradicted_file or voice.file,
            fix=RECHECK,
        )
    vouching = {name: v for name, v in published.items() if checks is None or name in checks}
    if pin is None and not vouching:
        if voice.unvouched is None:
            return None
        raise voice.refused(
            f"{voice.unvouched}; pin does not trust a download {voice.why}",
            file=voice.file,
            fix=voice.fix,
        )
    return vouching


def only_the_pin(unpublished: str) -> str:
    """The warning for pinned bytes nothing the registry publishes vouches for."""
    return f"{unpublished}; only the recipe's SHA-256 pin vouches for these bytes"
