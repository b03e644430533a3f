"""What data/packagers.toml says of each channel's packager: its relative cost per input byte
(the order packagers start in) and, per build kind, how it compresses."""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ortbundle._core.errors import ConfigError

_DATA = "ortbundle/data/packagers.toml"
_KINDS = ("release", "development")


@dataclass(frozen=True)
class Packager:
    channel: str
    cost: float  # time per input byte, relative to the other channels'
    compression: dict[str, dict[str, Any]]  # build kind → the packager's settings


@functools.cache
def packagers() -> dict[str, Packager]:
    """The table, read once and checked: a cost for every entry, settings per build kind."""
    text = resources.files("ortbundle").joinpath("data/packagers.toml").read_text("utf-8")
    table: dict[str, Packager] = {}
    for channel, entry in tomllib.loads(text).items():
        cost = entry.get("cost")
        if not isinstance(cost, int | float) or isinstance(cost, bool) or cost <= 0:
            raise ConfigError(f"[{channel}] cost must be a positive number", file=_DATA)
        unknown = set(entry) - {"cost", *_KINDS}
        if unknown:
            raise ConfigError(f"[{channel}] has unknown keys {sorted(unknown)}", file=_DATA)
        kinds = {kind: entry.get(kind, {}) for kind in _KINDS}
        if not all(isinstance(v, dict) for v in kinds.values()):
            raise ConfigError(f"[{channel}] release/development must be tables", file=_DATA)
        table[channel] = Packager(channel, float(cost), kinds)
    return table


def packager_cost(channel: str, release: bool) -> float:
    """The channel's relative cost per input byte for this kind of build (its kind's `cost`,
    else the channel's; 1 for a channel the table lacks)."""
    found = packagers().get(channel)
    if found is None:
        return 1.0
    kind = found.compression["release" if release else "development"]
    return float(kind.get("cost", found.cost))


def compression(channel: str, release: bool) -> dict[str, Any]:
    """The channel's compression settings for this kind of build (its cost left out)."""
    found = packagers().get(channel)
    if found is None:
        return {}
    kind = found.compression["release" if release else "development"]
    return {k: v for k, v in kind.items() if k != "cost"}


def development_compression(channel: str) -> str | None:
    """What a development build does faster than a release, as the summary says it ("zlib, a
    release: /SOLID lzma"); None where both kinds compress alike."""
    development, release = compression(channel, False), compression(channel, True)
    if development == release:
        return None

    def said(settings: dict[str, Any]) -> str:
        return " ".join(f"{v}" if k == "compressor" else f"{k} {v}" for k, v in settings.items())

    return f"{said(development)}, a release: {said(release)}"
