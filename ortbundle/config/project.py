"""Where a project lives and how a build was asked for: the few names every command needs.

Kept apart from plan.py (which loads recipes, schemas and targets) so that a command which ends
early, above all a no-op `invoke build`, imports only this.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ortbundle._core.errors import ConfigError
from ortbundle._core.locations import (
    ENV_CODESIGN_P12,
    ENV_CODESIGN_P12_PASSWORD,
    ENV_KEY,
    ENV_KEY_FILE,
    ENV_OPENPGP_KEY,
    default_key_path,
    signing_key_source,
)
from ortbundle.config.retry import RetryPolicy

DEFAULT_PRODUCT = "darkroom"
TOOL_LICENSE = Path(__file__).resolve().parents[2] / "LICENSE"  # ortbundle's own
TOOL_COMPONENT = "ortbundle"  # the loader, runtimes.json and NOTICE are ours


@dataclass(frozen=True)
class Project:
    """Where a project's inputs live and where its output goes."""

    root: Path
    dist: Path

    @classmethod
    def at(cls, root: Path, dist: Path | None = None) -> Project:
        return cls(root=root, dist=dist or root / "dist")

    @property
    def recipes(self) -> Path:
        return self.root / "recipes"

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"

    @property
    def licenses(self) -> Path:
        return self.root / "licenses"

    @property
    def templates(self) -> Path:
        return self.root / "templates"  # replacements of the built-in templates

    @property
    def keys(self) -> Path:
        return self.root / "keys"  # the products' public signing keys


@dataclass(frozen=True)
class BuildOptions:
    product: str = DEFAULT_PRODUCT
    targets: tuple[str, ...] = ()  # empty: every target of the product
    offline: bool = False
    index_url: str | None = None
    jobs: int = 0  # 0: one per core
    cache_dir: Path | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    release: bool = False  # the audit gate is strict, a signing key is required
    audit_only: bool = False  # stage aside, audit, and publish nothing
    audit_channels: tuple[str, ...] = ()  # empty: the product's packaging channels
    channels: tuple[str, ...] = ()  # package only these (and build only their targets)
    signing_key: Path | None = None  # else $ORTBUNDLE_SIGNING_KEY(_FILE), else the keygen default
    environ: Mapping[str, str] | None = None  # None: os.environ (tests pass their own)
    compare: Path | None = None  # report.html compares with this earlier build (a version dir)

    @property
    def workers(self) -> int:
        return self.jobs if self.jobs > 0 else (os.cpu_count() or 1)


def signing_key_identity(product: str, options: BuildOptions, environ: Mapping[str, str]) -> str:
    """Which keys would sign, as digests of their bytes: changes when a key does, loads nothing
    (the build manifest's key, the macOS code's identity and the Linux packages' OpenPGP key
    when one is given)."""
    raw = signing_key_source(key_path(product, options.signing_key, environ), environ)
    manifest = "unsigned" if raw is None else hashlib.sha256(raw).hexdigest()
    code = code_signer(environ)
    identity = manifest if code.p12 is None else f"{manifest} codesign {code.identity}"
    if named := environ.get(ENV_OPENPGP_KEY, "").strip():
        openpgp = Path(named).expanduser()
        held = openpgp.read_bytes() if openpgp.is_file() else named.encode()
        identity += f" openpgp {hashlib.sha256(held).hexdigest()}"
    return identity


@dataclass(frozen=True)
class CodeSigner:
    """Who signs the macOS code: ad-hoc (no identity; enough for Apple Silicon to load it), or
    the Developer ID identity in a .p12 (what notarization needs), named like the minisign key
    by the environment: ORTBUNDLE_CODESIGN_P12 (the file), ORTBUNDLE_CODESIGN_P12_PASSWORD."""

    p12: Path | None = None
    password: str = ""
    identity: str = "ad-hoc"  # a digest of the .p12's bytes: a new identity signs again

    @property
    def describe(self) -> str:
        return "ad-hoc" if self.p12 is None else f"with the identity in {self.p12.name}"


def code_signer(environ: Mapping[str, str]) -> CodeSigner:
    """The macOS code signer the environment names; a named .p12 that cannot be read is
    refused before anything is signed with the wrong identity."""
    named = environ.get(ENV_CODESIGN_P12, "").strip()
    if not named:
        return CodeSigner()
    path = Path(named)
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise ConfigError(
            f"{ENV_CODESIGN_P12} names {named}, which cannot be read ({exc.strerror})",
            file=named,
            fix=f"point {ENV_CODESIGN_P12} at the Developer ID .p12, or unset it to sign ad-hoc",
        ) from None
    return CodeSigner(path, environ.get(ENV_CODESIGN_P12_PASSWORD, ""), digest)


def key_path(product: str, key_file: Path | None, environ: Mapping[str, str]) -> Path | None:
    """The signing key file a build of `product` would use: `key_file`, else none when the
    environment holds the key, else the keygen default if it exists."""
    path = key_file
    if path is None and not (environ.get(ENV_KEY) or environ.get(ENV_KEY_FILE)):
        default = default_key_path(product, environ)
        path = default if default.is_file() else None
    return path


# Every output must record the epoch as it is: the rpm's BUILDTIME and file mtimes and the
# installer's PE TimeDateStamp are unsigned 32-bit (2**32 wraps to 1970), and the SBOM's and
# the changelogs' dates need a year below 10000. So: 1970-01-01 to 2106-02-07 (UTC).
EPOCH_RANGE = (0, 2**32 - 1)


def source_date_epoch(root: Path, environ: Mapping[str, str] | None = None) -> int:
    """SOURCE_DATE_EPOCH if set, else the commit time of the recipes, else 0 (never "now")."""
    environ = os.environ if environ is None else environ
    value = environ.get("SOURCE_DATE_EPOCH", "").strip()
    if value:
        return _epoch(value, f"SOURCE_DATE_EPOCH={_shown(value)}")
    text = git_output(root, "log", "-1", "--format=%ct", "--", "recipes", "manifests", "licenses")
    if not text:
        return 0
    return _epoch(text, f"the last commit of recipes/, manifests/ and licenses/ ({text})")


def _epoch(value: str, what: str) -> int:
    """`value` as seconds every output can record, or a ConfigError naming `what` and the range:
    ASCII digits only ("²" is a digit to str.isdigit, not to int()), few enough for int()."""
    least, most = EPOCH_RANGE
    if not re.fullmatch(r"[0-9]{1,20}", value) or not least <= int(value) <= most:
        raise ConfigError(
            f"{what} is not a count of seconds every output can record: it must be an "
            f"integer from {least} to {most} (1970-01-01 to 2106-02-07 UTC; the rpm and the "
            "installer store it in 32 bits)",
            fix="set SOURCE_DATE_EPOCH to the last commit's time (git log -1 --format=%ct)",
        )
    return int(value)


def _shown(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:37] + "...")


def git_output(root: Path, *args: str) -> str | None:
    """`git ARGS` run in `root`, its output stripped; None where git is missing or fails (not a
    repository, no commit yet): the callers then fall back to what needs no history."""
    try:
        found = subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return found.stdout.strip() if found.returncode == 0 else None
