"""Check what a build can before it downloads anything: the licence policy, and free space.

A full disk found half-way costs the time of every download before it; the sizes are known
up front. The cache needs the pinned size of every source it does not hold yet (less what a
partial download already has); dist/ needs room for a new version tree beside the old one,
which stays until the new one is swapped in — as large as the old one, or, for a first build,
at least the pinned downloads it is made from. When the cache and dist/ share a filesystem the
two add up. Sources without a pinned size count as zero: the check is a lower bound, never a
false refusal.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG

from ortbundle._core.errors import DiskError
from ortbundle._core.oserrors import amount, existing_ancestor, free_bytes, mib, mount_point
from ortbundle.config.plan import POLICY_NAME, Plan, Project
from ortbundle.config.sources import Source
from ortbundle.licensing.audit import load_policy, with_overlay


@dataclass(frozen=True)
class Need:
    where: Path  # a path on the filesystem
    what: str
    size: int


def tree_size(tree: Path) -> int:
    """Bytes the files under `tree` occupy that a new tree must write again: symlinks and files
    hard-linked from the cache's memo (which a new tree links too) count as nothing."""
    total = 0
    for directory, _, files in os.walk(tree):
        for name in files:
            stat = (Path(directory) / name).lstat()
            if S_ISREG(stat.st_mode) and stat.st_nlink == 1:
                total += max(stat.st_size, stat.st_blocks * 512)  # what the disk allocated
    return total


def download_need(sources: Iterable[Source], cache: Path) -> int:
    """Bytes still to download into the cache (layout: ortbundle/fetch/cache.py)."""
    total = 0
    seen: set[str] = set()
    for source in sources:
        if source.size is None or source.sha256 in seen:
            continue
        seen.add(source.sha256)
        if (cache / "sha256" / source.sha256[:2] / source.sha256).is_file():
            continue
        partial = cache / "partial" / f"{source.sha256}.part"
        have = partial.stat().st_size if partial.is_file() else 0
        total += max(source.size - have, 0)
    return total


def preflight(project: Project, plan: Plan, cache: Path, version_dir: Path) -> None:
    """What a build can check before its first request: the inputs loading a plan does not
    read (the licence policy, read by the audit after staging), then the free space."""

    # the product's [policy] too: an unknown channel or set stops the build before downloads
    with_overlay(load_policy(project.licenses / POLICY_NAME), plan.product.policy)
    check_space([source for _, source in plan.all_sources()], cache, version_dir)


def check_space(sources: Iterable[Source], cache: Path, version_dir: Path) -> None:
    """Raise the disk error before anything is fetched if the cache or dist/ lacks room."""
    wanted = list(sources)
    downloads = download_need(wanted, cache)
    if version_dir.is_dir():
        tree = tree_size(version_dir)
    else:
        tree = sum({s.sha256: s.size or 0 for s in wanted}.values())
    needs = [
        Need(cache, "the downloads into the cache", downloads),
        Need(version_dir, "the new version tree in dist/", tree),
    ]
    by_device: dict[int, list[Need]] = {}
    for need in needs:
        if need.size:
            by_device.setdefault(existing_ancestor(need.where).stat().st_dev, []).append(need)
    for group in by_device.values():
        total = sum(n.size for n in group)
        free = free_bytes(group[0].where)
        if total <= free:
            continue
        mount = mount_point(group[0].where)
        parts = " and ".join(f"{n.what} ({mib(n.size)})" for n in group)
        raise DiskError(
            f"not enough free space for this build on {mount}: {parts} need {mib(total)}, "
            f"it has {amount(free)}; nothing was downloaded",
            file=str(group[0].where),
            fix=f"free {mib(total - free)} on {mount}, or point the cache (ORTBUNDLE_CACHE_DIR) "
            "or the output (--dist) at a larger filesystem",
        )
