"""Typed failures with distinct exit codes.

Every failure a user can meet says which component, which target, which file, and what to do
next, in one message. The exit code tells CI which class of failure it was without parsing text.
"""

from __future__ import annotations


class OrtbundleError(Exception):
    """Base class: a failure with context and a suggested fix."""

    exit_code = 1
    kind = "error"

    def __init__(
        self,
        message: str,
        *,
        component: str | None = None,
        target: str | None = None,
        file: str | None = None,
        fix: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.component = component
        self.target = target
        self.file = file
        self.fix = fix

    def __str__(self) -> str:
        where = [
            f"{label} {value}"
            for label, value in (
                ("component", self.component),
                ("target", self.target),
                ("file", self.file),
            )
            if value
        ]
        text = self.message
        if where:
            text = f"{text} [{', '.join(where)}]"
        if self.fix:
            text = f"{text} — fix: {self.fix}"
        return text


class ConfigError(OrtbundleError):
    """A recipe, product manifest, target table or setting is wrong."""

    exit_code = 2
    kind = "configuration"


class FetchError(OrtbundleError):
    """An artifact could not be downloaded (network, HTTP status, missing in the index)."""

    exit_code = 3
    kind = "fetch"


class IntegrityError(OrtbundleError):
    """Bytes did not match their pin, the index's digest, or the archive's RECORD."""

    exit_code = 4
    kind = "integrity"


class OfflineError(OrtbundleError):
    """--offline was asked for and the cache lacks an artifact."""

    exit_code = 5
    kind = "offline"


class ArchiveError(OrtbundleError):
    """A hostile or malformed archive member."""

    exit_code = 6
    kind = "archive"


class BinaryError(OrtbundleError):
    """A library that cannot be read as the ELF or PE file it claims to be."""

    exit_code = 7
    kind = "binary"


class ClosureError(OrtbundleError):
    """A kept library needs something that is neither kept nor an allowed external."""

    exit_code = 8
    kind = "closure"


class LicenseError(OrtbundleError):
    """A staged file has no licence attribution, or an attribution is ambiguous or invalid."""

    exit_code = 9
    kind = "licence"


class AuditError(OrtbundleError):
    """The licence audit refused a channel: missing text, refused licence, or (release) a waiver."""

    exit_code = 10
    kind = "audit"


class PackagingError(OrtbundleError):
    """A packaging tool (makensis, makepkg, …) failed on what we generated."""

    exit_code = 11
    kind = "packaging"


class DiskError(OrtbundleError):
    """The operating system refused a write: a full disk or quota, a read-only or unwritable
    directory, too many open files, a path too long (_core/oserrors.py says which, and what to
    do)."""

    exit_code = 12
    kind = "disk"


class SmokeError(OrtbundleError):
    """`invoke smoke`: a built package did not install or a runtime in it did not run right."""

    exit_code = 13
    kind = "smoke"
