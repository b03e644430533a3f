"""What the APK channel's files weigh: per runtime and in total, as the APK stores them (libraries
uncompressed and page-aligned) and as a download deflates them (an estimate, memoised per file).
The channel itself (channels/apk.py) decides where each file goes; this reads its placements."""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ortbundle.channels import PackageInput
from ortbundle.config.targets import Target
from ortbundle.licensing.attribution import ShippedFile

_DEFLATE_LEVEL = 6  # what zip tools use by default: an estimate of the compressed size
_CHUNK = 1 << 20


@dataclass
class _Figures:
    """What one runtime (or the whole ABI) weighs in the APK."""

    libraries: int = 0
    library_bytes: int = 0
    library_apk_bytes: int = 0  # stored uncompressed, each rounded up to the page
    assets: int = 0
    asset_bytes: int = 0
    deflate_bytes: int = 0  # note only: zlib's output is not the same on every host
    label: str = ""
    seen: set[str] = field(default_factory=set)

    def add(self, placement: Placement, page: int, deflated: int) -> None:
        if placement.dest in self.seen:
            return
        self.seen.add(placement.dest)
        size = placement.source.size
        self.deflate_bytes += deflated
        if placement.kind == "library":
            self.libraries += 1
            self.library_bytes += size
            self.library_apk_bytes += -(-size // page) * page
        else:
            self.assets += 1
            self.asset_bytes += size

    def as_json(self) -> dict[str, int]:
        return {
            "files": self.libraries + self.assets,
            "bytes": self.library_bytes + self.asset_bytes,
            "apk_bytes": self.library_apk_bytes + self.asset_bytes,
            "libraries": self.libraries,
            "library_bytes": self.library_bytes,
            "library_apk_bytes": self.library_apk_bytes,
            "assets": self.assets,
            "asset_bytes": self.asset_bytes,
        }


# --- the size report ---------------------------------------------------------------------------


def deflate_estimates(package: PackageInput, placements: Sequence[Placement]) -> dict[str, int]:
    """zlib level-6 size of each shipped file, by SHA-256: what a download weighs. Streamed,
    in parallel (zlib releases the GIL), and memoised per file under the cache (30 MB/s: the
    arm64 QNN stage takes seconds)."""
    sources = {p.source.sha256: p for p in placements}
    workers = max(1, min(4, os.cpu_count() or 1, len(sources)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        sizes = pool.map(lambda p: _deflated(package, p.source, p.data), sources.values())
        return dict(zip(sources, sizes, strict=True))


def _deflated(package: PackageInput, shipped: ShippedFile, data: bytes | None = None) -> int:
    if data is not None:  # generated, and small
        return _deflate_size([data])
    path = package.stage / shipped.path

    def deflate() -> int:
        with path.open("rb") as stream:
            return _deflate_size(iter(lambda: stream.read(_CHUNK), b""))

    # by the bytes, the level and zlib's version alone: no ortbundle code shapes the size
    parts = [shipped.sha256, f"z{_DEFLATE_LEVEL}", zlib.ZLIB_RUNTIME_VERSION]
    return package.memo.remembered("apk-deflate", parts, deflate, int, int, code=False)


def _deflate_size(chunks: Iterable[bytes]) -> int:
    compressor = zlib.compressobj(_DEFLATE_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    size = sum(len(compressor.compress(chunk)) for chunk in chunks)
    return size + len(compressor.flush())


def size_report(
    package: PackageInput,
    target: Target,
    runtimes: Sequence[Mapping[str, Any]],
    placements: Sequence[Placement],
    deflated: Mapping[str, int],
    *,
    legacy_packaging: bool,
    no_compress: Sequence[str],
) -> tuple[bytes, list[str]]:
    """Per runtime and in total: files and bytes, and what they occupy in the APK. A file two
    runtimes share counts in each and once in the total."""
    abi = str(target.abi)
    page = target.page_align or 1
    owners: dict[str, _Figures] = {}
    for runtime in runtimes:
        owners[f"runtimes/{runtime['name']}"] = _Figures(label=str(runtime.get("label", "")))
    groups = {kind: _Figures() for kind in ("index", "license", "model")}
    total = _Figures()
    for placement in placements:
        if placement.dest.startswith("jniLibs/"):
            continue  # the flat tree: the same files again, not in the module's APK
        size = deflated[placement.source.sha256]
        for owner in placement.owners:
            owners.setdefault(owner, _Figures()).add(placement, page, size)
        if placement.kind in groups:
            groups[placement.kind].add(placement, page, size)
        total.add(placement, page, size)
    runtime_figures = [
        {"name": owner.removeprefix("runtimes/"), "label": f.label, **f.as_json()}
        for owner, f in owners.items()
        if owner.startswith("runtimes/")
    ]
    plugins = [
        {"name": owner.removeprefix("plugins/"), **f.as_json()}
        for owner, f in owners.items()
        if owner.startswith("plugins/")
    ]
    report = {
        "schema": "ortbundle.apk-size/1",
        "product": package.product,
        "version": package.version,
        "target": package.target,
        "abi": abi,
        "page_align": target.page_align,
        "use_legacy_packaging": legacy_packaging,
        "apk_bytes_means": "libraries stored uncompressed, each from its page-aligned start "
        "rounded up to page_align; assets at their uncompressed size: exact for the "
        f"uncompressed ones ({', '.join('*.' + e for e in no_compress)}), an upper bound for "
        "the rest, which the APK deflates",
        "runtimes": runtime_figures,
        "plugins": plugins,
        "index": groups["index"].as_json(),
        "licenses": groups["license"].as_json(),
        "models": groups["model"].as_json(),
        "total": total.as_json(),
    }
    data = (json.dumps(report, indent=2, sort_keys=True) + "\n").encode("ascii")
    parts = [
        f"{owner.removeprefix('runtimes/')} {_mb(f.library_apk_bytes + f.asset_bytes)} MiB "
        f"({count(f.libraries, 'library', 'libraries')}{_assets_text(f)}, "
        f"≈{_mb(f.deflate_bytes)} MiB deflated)"
        for owner, f in owners.items()
    ]
    line = (
        f"{abi}: {', '.join(parts)}; {_mb(total.library_apk_bytes + total.asset_bytes)} MiB "
        f"in the APK with the index, licences and models (≈{_mb(total.deflate_bytes)} MiB "
        f"deflated); size-report.{abi}.json"
    )
    return data, [line]


def _assets_text(figures: _Figures) -> str:
    if not figures.assets:
        return ""
    return f" + {count(figures.assets, 'asset', 'assets')} of {_mb(figures.asset_bytes)} MiB"


def count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _mb(size: int) -> str:
    return f"{size / (1 << 20):.1f}"


@dataclass(frozen=True)
class Placement:
    """One file the channel writes from the stage."""

    dest: str  # relative to the channel directory
    source: ShippedFile  # the stage entry whose bytes it carries (a link: the file it names)
    kind: str  # library | asset | index | license | model
    owners: tuple[str, ...] = ()  # the runtime/plugin directories that carry it
    data: bytes | None = None  # written instead of the stage file's bytes (the APK's index)

    @property
    def shared(self) -> bool:
        return self.kind in ("license", "model")
