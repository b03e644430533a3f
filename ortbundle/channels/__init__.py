"""Packaging channels: each turns one finished target stage into the files a packager ships.

A channel never looks inside the build: it receives a `PackageInput` — the stage directory, the
exact list of files in it, the licences and the external libraries the closure found — and
writes its files under `dist/<product>/<version>/packaging/<channel>/`. Everything a channel
writes must be a pure function of its input (no clocks, host paths or user names), so two
builds of the same inputs produce the same bytes.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ortbundle._core.errors import IntegrityError
from ortbundle._core.fsio import sha256_file
from ortbundle._core.memo import NO_MEMO, Memo
from ortbundle._core.overrides import NO_OVERRIDES, Overrides
from ortbundle.channels.openpgp import OpenPgpKey
from ortbundle.config.products import Addon, SystemSpec

# CHANNEL_TARGETS and PackagingSettings live with the data they describe (targets, product
# manifests), so reading a product does not import the channels; re-exported here.
from ortbundle.config.products import PackagingSettings as PackagingSettings
from ortbundle.config.recipes import AccelDevice
from ortbundle.config.targets import ChannelPackages, ExternalGroup
from ortbundle.config.vocabulary import CHANNEL_TARGETS as CHANNEL_TARGETS
from ortbundle.config.vocabulary import SHARED_PACKAGE_CHANNELS
from ortbundle.fetch.cache import stat_record
from ortbundle.licensing.attribution import ShippedFile
from ortbundle.stage.binaries.baseline import SystemBaseline
from ortbundle.stage.binaries.baseline import render_dependency as render_dependency
from ortbundle.stage.closure import ExternalLibrary


def package_directory(channel: str, target: str) -> str:
    """Where `channel`'s package of `target` goes, relative to packaging/<channel>/: its first
    target's (and a shared package's) right there, as always; each further target's in a
    subdirectory named by the target (packaging/deb/linux-aarch64/), so a runner that builds
    only that target writes the same paths a whole build does."""
    targets = CHANNEL_TARGETS[channel]
    if channel in SHARED_PACKAGE_CHANNELS or target == targets[0]:
        return ""
    return target


@dataclass(frozen=True)
class ShippedRuntime:
    name: str  # "openvino"
    label: str  # "OpenVINO"
    directory: str  # "runtimes/openvino"
    needs_gpu: bool  # a GPU rung: needs /dev/dri in a sandbox


@dataclass(frozen=True)
class Attribution:
    """One shipped component's licence facts, for formats that list them (Debian copyright)."""

    component: str
    version: str
    expression: str  # SPDX
    copyrights: tuple[str, ...]
    files: tuple[str, ...]  # stage paths it contributes
    texts: tuple[str, ...]  # stage paths of its licence texts


@dataclass(frozen=True)
class PackageInput:
    product: str
    version: str
    description: str
    url: str
    target: str
    stage: Path  # the published target stage: dist/<product>/<version>/<target>
    files: tuple[ShippedFile, ...]  # every entry of the stage, sorted by path
    licenses: tuple[str, ...]  # SPDX ids and LicenseRef-… of every shipped component, sorted
    # what the user's machine must provide, as the target's requirements model resolved it
    # (stage/requirements.py): one record per library, required or optional for the package
    externals: tuple[ExternalLibrary, ...]
    runtimes: tuple[ShippedRuntime, ...]
    settings: PackagingSettings
    source_date_epoch: int  # every timestamp written into a package
    # where expensive outputs are memoised (channels/output_cache.py); off: a release produces every
    # package afresh
    memo: Memo = NO_MEMO
    attribution: tuple[Attribution, ...] = ()  # per component, from the licence attribution
    sbom: str = ""  # this target's CycloneDX SBOM (JSON), shipped inside the .deb and .rpm
    # the oldest system the package runs on, from the same model: what the staged binaries
    # need, raised to the product's `[system]` promise (render_dependency turns it into a
    # channel's constraint: glibc>=2.34, libc6 (>= 2.34)); and the promise itself (`[system]`)
    system: SystemBaseline = field(default_factory=SystemBaseline)
    supports: SystemSpec = field(default_factory=SystemSpec)
    # the product's and recipes' [[externals]] package names per channel (over data/arch.toml,
    # data/linux-packages.toml), the manifest that declares them, and the main product an
    # add-on installs beside (into its directory)
    packages: tuple[ChannelPackages, ...] = ()
    manifest: str = ""
    addon_of: Addon | None = None
    # the external groups of every Android target the apk channel packages (tool data with the
    # recipe and product overlays): its shared manifest declares the same libraries for every
    # ABI; empty: targets.toml's
    android_groups: tuple[ExternalGroup, ...] = ()
    # the project's replacements of built-in templates (templates/, [packaging] templates)
    templates: Overrides = NO_OVERRIDES
    # the OpenPGP key that signs the .deb, the .rpm and the Arch source (channels/openpgp.py);
    # None: they are unsigned
    openpgp: OpenPgpKey | None = None
    # a release build: each packager compresses as data/packagers.toml says for a release
    # (the smallest output); a development build may trade size for time
    release: bool = False

    # the NPUs behind /dev/accel its plugin EPs drive ([component] device): a system
    # requirement no package can depend on (a kernel driver), said in the description, and a
    # udev rule giving the render group their nodes
    devices: tuple[AccelDevice, ...] = ()
    # the add-on packages the main product suggests on this target (package, why): never a
    # dependency (a GPL plugin's package, which the application must not require)
    suggests: tuple[tuple[str, str], ...] = ()

    def udev_rules(self) -> dict[str, str]:
        """/usr/lib/udev/rules.d/<file> -> its text, one per accel driver."""
        return {
            f"60-{self.settings.package_name}-{d.driver}.rules": udev_rule(
                self.settings.package_name, d
            )
            for d in self.devices
        }


UDEV_RULES_DIR = "/usr/lib/udev/rules.d"  # where udev reads a package's rules


def udev_rule(package: str, device: AccelDevice) -> str:
    """The render group may open the driver's accel nodes: the application needs no sudo."""
    return (
        f"# {package}: {device.requirement()}. The {device.driver} driver's accel nodes\n"
        "# belong to the render group, so an application run by its members needs no sudo.\n"
        f'SUBSYSTEM=="accel", KERNEL=="accel*", DRIVERS=="{device.driver}", '
        'GROUP="render", MODE="0660"\n'
    )


@dataclass(frozen=True)
class PackageTime:
    """How long one target's packager ran (wall time, seconds): where a build's time goes."""

    target: str
    seconds: float


@dataclass(frozen=True)
class ChannelOutput:
    channel: str
    directory: Path
    files: tuple[Path, ...]  # what the channel wrote, sorted
    notes: tuple[str, ...]  # what a packager must know (printed by the build)
    digests: Mapping[str, str] = field(default_factory=dict)  # file name -> SHA-256 if known
    # file name (as `digests`) -> who signed it: its certificate's "subject" and "sha256"
    signers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    times: tuple[PackageTime, ...] = ()  # per target, in the channel's target order


class Channel(Protocol):
    """One packaging format. Implementations live in ortbundle/channels/<name>.py."""

    name: str  # "arch", "flatpak", "nsis"
    target: str  # the target whose stage it packages

    def generate(self, package: PackageInput, out: Path) -> ChannelOutput:
        """Write the channel's files into `out` (an empty directory) and return them."""
        ...


def stage_changed(package: PackageInput, path: Path, component: str | None) -> IntegrityError:
    """A channel reads only what the build staged: anything else is this error."""
    return IntegrityError(
        "a staged file changed or vanished after the build",
        component=component,
        target=package.target,
        file=str(path),
        fix="rebuild the stage (invoke build) instead of editing it",
    )


def check_staged(package: PackageInput, shipped: ShippedFile, component: str | None) -> None:
    """The file is still the regular file of the size and SHA-256 the build staged."""
    path = package.stage / shipped.path
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise stage_changed(package, path, component) from None
    if not stat.S_ISREG(info.st_mode) or info.st_size != shipped.size:
        raise stage_changed(package, path, component)
    if shipped.stamp is not None and shipped.stamp == stat_record(info):
        return  # untouched since the build listed it (a write moves mtime and ctime)
    if sha256_file(path) != shipped.sha256:
        raise stage_changed(package, path, component)
