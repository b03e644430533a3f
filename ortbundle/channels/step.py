"""The channels step: turn each finished target stage into the packages the product ships.

Its entry is `generate_all`, over one `package_input` per target."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ortbundle._core.memo import Memo
from ortbundle._core.overrides import NO_OVERRIDES, Overrides
from ortbundle.channels import (
    CHANNEL_TARGETS,
    Attribution,
    Channel,
    ChannelOutput,
    PackageInput,
    ShippedRuntime,
    package_directory,
)
from ortbundle.channels.apk import ApkChannel
from ortbundle.channels.arch import ArchChannel
from ortbundle.channels.deb import DebChannel
from ortbundle.channels.flatpak import FlatpakChannel
from ortbundle.channels.macos import MacosChannel
from ortbundle.channels.nsis import NsisChannel
from ortbundle.channels.rpm import RpmChannel
from ortbundle.config.products import Product
from ortbundle.config.recipes import Recipe
from ortbundle.config.targets import PACKAGE_CHANNELS, get_target, overlays
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
) -> PackageInput:
    """The hand-off: everything a channel may know about one target stage; what the user's
    machine must provide is the target's requirements model, as every output renders it;
    `memo`: the build's, where a channel keeps what it produced; `templates`: the project's
    replacements of built-in templates."""
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


def generate_all(
    channels: Sequence[str], inputs: dict[str, PackageInput], out: Path, workers: int
) -> list[ChannelOutput]:
    """Run every channel into out/<channel>/, in parallel (makensis and gzip are CPU-bound).

    A channel that packages several targets runs once per target, in order: the Android module
    (one ABI each) into the same directory, where the files the targets share are identical;
    the Linux channels each into its own (package_directory)."""

    def one(name: str) -> ChannelOutput:
        base = out / name
        base.mkdir(parents=True)
        outputs = [
            CHANNELS[name]().generate(inputs[target], base / package_directory(name, target))
            for target in CHANNEL_TARGETS[name]
            if target in inputs
        ]
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
        )

    wanted = [c for c in channels if any(t in inputs for t in CHANNEL_TARGETS[c])]
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(wanted)))) as pool:
        return list(pool.map(one, wanted))


def package_digests(packages: Sequence[ChannelOutput]) -> dict[str, str]:
    """The SHA-256 each channel already computed, by output path: not hashed twice."""
    return {
        f"packaging/{p.channel}/{name}": sha256
        for p in packages
        for name, sha256 in p.digests.items()
    }
