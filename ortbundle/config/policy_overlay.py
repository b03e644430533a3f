"""A product's licence policy overlay: `[policy]` in its manifest, shaped like
licenses/policy.toml (`[policy.sets]`, `[policy.channels.<name>]` with allow/review/refuse and
`unknown`), merged over the project's policy without editing it.

The product's lists are consulted before the project's, so a product may allow its own licence
class (`LicenseRef-<Vendor>-*`) or tighten anything; a licence the project's policy refuses on a
channel stays refused (no product loosens a refusal: change the policy, in review).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from ortbundle.config.tomlreader import TableReader
from ortbundle.config.vocabulary import VERDICTS

if TYPE_CHECKING:
    pass

Verdict = Literal["allow", "review", "refuse"]
_ORDER: tuple[Verdict, ...] = ("refuse", "review", "allow")  # the product's lists, refuse first

_CHANNEL_KEYS = (*VERDICTS, "unknown")


@dataclass(frozen=True)
class ChannelOverlay:
    """One `[policy.channels.<name>]`: globs (sets still written as @name) per verdict."""

    name: str
    rules: tuple[tuple[Verdict, tuple[str, ...]], ...]  # (verdict, globs), refuse first
    unknown: Verdict | None = None


@dataclass(frozen=True)
class PolicyOverlay:
    sets: tuple[tuple[str, tuple[str, ...]], ...] = ()
    channels: tuple[ChannelOverlay, ...] = ()
    origin: str = ""  # the manifest, for errors

    @property
    def empty(self) -> bool:
        return not self.channels


def read_policy(top: TableReader) -> PolicyOverlay:
    """`[policy]` of a product manifest, checked for shape; set names resolve at audit time."""
    if "policy" not in top.table:
        return PolicyOverlay()
    policy = top.sub("policy")
    unknown = sorted(set(policy.table) - {"sets", "channels"})
    if unknown:
        raise policy.fail(f"unknown key {unknown[0]!r} (known: sets, channels)")
    sets_table = TableReader(policy.path, "policy.sets", policy.table.get("sets", {}))
    sets = tuple((name, sets_table.text_list(name)) for name in sorted(sets_table.table))
    channels_table = TableReader(policy.path, "policy.channels", policy.table.get("channels", {}))
    channels = []
    for name in sorted(channels_table.table):
        channel = channels_table.sub(name)
        bad = sorted(set(channel.table) - set(_CHANNEL_KEYS))
        if bad:
            raise channel.fail(f"unknown key {bad[0]!r} (known: {', '.join(_CHANNEL_KEYS)})")
        verdict = channel.opt_text("unknown")
        if verdict is not None and verdict not in VERDICTS:
            raise channel.fail(f"unknown {verdict!r} must be allow, review or refuse")
        rules = tuple(
            (v, channel.text_list(v, required=False)) for v in _ORDER if v in channel.table
        )
        channels.append(ChannelOverlay(name, rules, cast(Verdict | None, verdict)))
    return PolicyOverlay(sets, tuple(channels), str(policy.path))


def expand_sets(
    globs: tuple[str, ...], own: dict[str, tuple[str, ...]], project: dict[str, Any]
) -> tuple[str, ...] | str:
    """Globs with `@set` expanded from the product's sets, then the project's; the name of an
    unknown set (as a str) when one is missing."""
    out: list[str] = []
    for glob in globs:
        if not glob.startswith("@"):
            out.append(glob)
            continue
        name = glob[1:]
        if name in own:
            expanded = expand_sets(own[name], {k: v for k, v in own.items() if k != name}, project)
        elif name in project:
            expanded = tuple(project[name])
        else:
            return glob
        if isinstance(expanded, str):
            return expanded
        out.extend(expanded)
    return tuple(out)
