"""The channels step: turn each finished target stage into the packages the product ships.

Its entry is `generate_all`, over one `package_input` per target."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ortbundle._core.memo import Memo
from ortbundle._core.overrides import NO_OVERRIDES, Overrides
from ortbundle.channels import (
    CHANNEL_TARGETS,
    Attribution,
    Channel,
    ChannelOutput,
    PackageInput,
    PackageTime,
    ShippedRuntime,
    package_directory,
)
from ortbundle.channels.apk import ApkChannel
from ortbundle.channels.arch import ArchChannel
from ortbundle.channels.deb import DebChannel
from ortbundle.channels.flatpak import FlatpakChannel
from ortbundle.channels.macos import MacosChannel
from ortbundle.channels.nsis import NsisChannel
from ortbundle.channels.openpgp import OpenPgpKey
from ortbundle.channels.packagers import packager_cost
from ortbundle.channels.rpm import RpmChannel
from ortbundle.config.products import Product
from ortbundle.config.recipes import Recipe
from ortbundle.config.targets import PACKAGE_CHANNELS, get_target, overlays
from ortbundle.config.vocabulary import SHARED_PACKAGE_CHANNELS
from ortbundle.evidence.record import cached_sbom_json
from ortbundle.licensing.attribution import ShippedFile, TargetLicensing
from ortbundle.stage.index_json import GENERIC_GPU_PROVIDERS
from ortbundle.stage.requirements import TargetRequirements
from ortbundle.stage.staging import StagedRuntime


def _apk() -> Channel:

    return ApkChannel()


CHANNELS: dict[str, Callable[[], Channel]] = {
    "arch": ArchChannel,
    "flatpak": FlatpakChannel,
    "nsis": NsisChannel,
    "apk": _apk,
    "deb": DebChannel,
    "rpm": RpmChannel,
    "macos": MacosChannel,
}
assert set(CHANNELS) == set(CHANNEL_TARGETS)


def package_input(
    product: Product,
    target: str,
    stage: Path,
    files: tuple[ShippedFile, ...],
    licensing: TargetLicensing,
    runtimes: Sequence[tuple[Recipe, StagedRuntime]],
    requirements: TargetRequirements,
    epoch: int,
    memo: Memo,
    templates: Overrides = NO_OVERRIDES,
    openpgp: OpenPgpKey | None = None,
    release: bool = False,
) -> PackageInput:
    """The hand-off: everything a channel may know about one target stage; what the user's
    machine must provide is the target's requirements model, as every output renders it;
    `memo`: the build's, where a channel keeps what it produced; `templates`: the project's
    replacements of built-in templates; `openpgp`: the key that signs the Linux packages;
    `release`: compress for the smallest output."""
    overlay = overlays(product.externals, (s for r, _ in runtimes for s in r.externals))
    return PackageInput(
        product=product.name,
        version=product.version,
        description=product.description,
        url=product.url,
        target=target,
        stage=stage,
        files=files,
        licenses=licensing.license_ids,
        externals=requirements.externals,
        runtimes=tuple(
            ShippedRuntime(
                name=recipe.name,
                label=recipe.label,
                directory=staged.directory,
                needs_gpu=bool(recipe.gpu_vendors)
                or bool(GENERIC_GPU_PROVIDERS & set(recipe.providers_for(staged.target))),
            )
            for recipe, staged in runtimes
        ),
        settings=product.packaging,
        source_date_epoch=epoch,
        memo=memo,
        attribution=tuple(
            Attribution(
                c.name,
                c.version,
                c.expression,
                c.copyrights,
                tuple(f.path for f in c.files),
                tuple(t.path for t in c.texts),
            )
            for c in licensing.components
        ),
        sbom=_target_sbom(product, licensing, requirements, epoch, memo),
        system=requirements.system,
        supports=product.system,
        packages=tuple(
            p for channel in PACKAGE_CHANNELS for p in overlay.packages(target, channel).values()
        ),
        manifest=str(product.path),
        addon_of=product.addon_of,
        devices=tuple(dict.fromkeys(r.device for r, _ in runtimes if r.device is not None)),
        suggests=tuple(
            (s.package_name, s.description) for s in product.suggests if target in s.targets
        ),
        # the module's manifest is shared by every ABI: every Android target's groups, overlaid
        android_groups=tuple(
            g for t in CHANNEL_TARGETS["apk"] for g in overlay.apply(get_target(t)).externals
        )
        if target in CHANNEL_TARGETS["apk"]
        else (),
        templates=templates,
        openpgp=openpgp,
        release=release,
    )


def _target_sbom(
    product: Product,
    licensing: TargetLicensing,
    requirements: TargetRequirements,
    epoch: int,
    memo: Memo,
) -> str:
    """The target's own SBOM (the .deb and .rpm carry it); the release SBOM covers every target."""
    return cached_sbom_json(
        memo, product, [licensing], {}, epoch, {requirements.target: requirements.as_json()}
    )


@dataclass(frozen=True)
class PackagerJob:
    """One run of a channel: one target's package, or (a shared package: the APK module) every
    target it packages, in order, into the one directory they share."""

    channel: str
    targets: tuple[str, ...]
    cost: float  # input bytes times the channel's relative cost per byte: the order jobs start in


def packager_jobs(channels: Sequence[str], inputs: dict[str, PackageInput]) -> list[PackagerJob]:
    """Every (channel, target) package to make, the longest first: on a few cores the critical
    path (the solid-LZMA x64 installer) must start at once, not behind short jobs."""
    jobs = []
    for channel in channels:
        targets = tuple(t for t in CHANNEL_TARGETS[channel] if t in inputs)
        groups = [targets] if channel in SHARED_PACKAGE_CHANNELS else [(t,) for t in targets]
        for group in groups:
            if not group:
                continue
            weight = packager_cost(channel, inputs[group[0]].release)
            size = sum(f.size for t in group for f in inputs[t].files)
            jobs.append(PackagerJob(channel, group, size * weight))
    # stable: equal costs keep the product's channel order
    return sorted(jobs, key=lambda job: -job.cost)


def generate_all(
    channels: Sequence[str], inputs: dict[str, PackageInput], out: Path, workers: int
) -> list[ChannelOutput]:
    """Run every channel into out/<channel>/, each (channel, target) package a job of its own,
    on `workers` threads (makensis, nfpm and zlib work outside the GIL), the longest first.

    A shared package (the Android module, one ABI each) is one job: its targets run in order into
    the same directory, where the files they share are identical. Every other channel's targets
    are separate jobs, each into its own package_directory. Each output carries how long its
    packager took (`times`), in the order of the channel's targets."""

    def one(job: PackagerJob) -> tuple[PackagerJob, list[ChannelOutput]]:
        base = out / job.channel
        outputs = []
        for target in job.targets:
            started = time.perf_counter()
            output = CHANNELS[job.channel]().generate(
                inputs[target], base / package_directory(job.channel, target)
            )
            took = PackageTime(target, time.perf_counter() - started)
            outputs.append(dataclasses.replace(output, times=(took,)))
        return job, outputs

    jobs = packager_jobs(channels, inputs)
    for channel in dict.fromkeys(job.channel for job in jobs):
        (out / channel).mkdir(parents=True)
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs) or 1))) as pool:
        done = list(pool.map(one, jobs))
    by_channel: dict[str, list[ChannelOutput]] = {}
    for job, outputs in done:
        by_channel.setdefault(job.channel, []).extend(outputs)
    return [
        _merged(name, out / name, by_channel[name], inputs)
        for name in channels
        if name in by_channel
    ]


def _merged(
    name: str, base: Path, outputs: list[ChannelOutput], inputs: dict[str, PackageInput]
) -> ChannelOutput:
    """One channel's outputs as one, its targets in the channel's order (as a serial run wrote
    them)."""
    order = {t: n for n, t in enumerate(CHANNEL_TARGETS[name])}
    outputs.sort(key=lambda o: order[o.times[0].target] if o.times else 0)
    if len(outputs) == 1 and outputs[0].directory == base:
        return outputs[0]
    return ChannelOutput(
        channel=name,
        directory=base,
        files=tuple(sorted({f for o in outputs for f in o.files})),
        notes=tuple(dict.fromkeys(n for o in outputs for n in o.notes)),
        # by path under the channel's directory: packaging/deb/linux-aarch64/<file>
        digests={
            (o.directory / k).relative_to(base).as_posix(): v
            for o in outputs
            for k, v in o.digests.items()
        },
        signers={
            (o.directory / k).relative_to(base).as_posix(): v
            for o in outputs
            for k, v in o.signers.items()
        },
        times=tuple(t for o in outputs for t in o.times),
    )


def package_signers(packages: Sequence[ChannelOutput]) -> dict[str, Mapping[str, str]]:
    """Who signed each signed package (an Authenticode certificate's subject and SHA-256, an
    OpenPGP key's fingerprint), by output path."""
    return {
        f"packaging/{p.channel}/{name}": signer
        for p in packages
        for name, signer in p.signers.items()
    }


def package_digests(packages: Sequence[ChannelOutput]) -> dict[str, str]:
    """The SHA-256 each channel already computed, by output path: not hashed twice."""
    return {
        f"packaging/{p.channel}/{name}": sha256
        for p in packages
        for name, sha256 in p.digests.items()
    }
