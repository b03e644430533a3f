"""How components combine into one program: the policy's `[[incompatible]]` licence pairs
(licensing/compatibility.py finds them in a build), and how a copyleft component the policy's
[obligations] combined names is combined with the application (the audit's verdict on it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ortbundle.licensing.attribution import ComponentUse
from ortbundle.licensing.obligations import is_model, obliging_ids

__all__ = ["Incompatible", "Shipping", "combination_of", "incompatible_pairs"]


@dataclass(frozen=True)
class Incompatible:
    """One `[[incompatible]]` entry: licence id globs on each side, why, and who says so."""

    first: tuple[str, ...]
    second: tuple[str, ...]
    why: str
    source: str


def incompatible_pairs(
    entries: Sequence[Mapping[str, Any]], expand: Callable[[list[str], str], tuple[str, ...]]
) -> tuple[Incompatible, ...]:
    """The policy's `[[incompatible]]` entries, their `@set`s expanded by `expand`."""
    return tuple(
        Incompatible(
            expand(list(entry["first"]), f"incompatible[{i}].first"),
            expand(list(entry["second"]), f"incompatible[{i}].second"),
            str(entry["why"]),
            str(entry["source"]),
        )
        for i, entry in enumerate(entries)
    )


@dataclass(frozen=True)
class Shipping:
    """How the product ships its components: the application's licence, and whether its
    packages are the application's main package or an add-on's own optional one."""

    product: str
    license: str | None  # [product] license; None: not stated (nothing is judged)
    package: str  # the package its files ship in
    addon_of: str | None = None  # the main product, for an add-on

    @property
    def proprietary(self) -> bool:
        """A licence no SPDX id names (LicenseRef-Proprietary): the application's own terms."""
        return self.license is not None and self.license.startswith("LicenseRef-")


def combination_of(
    combined: Sequence[str],
    name: str,
    uses: Sequence[tuple[str, ComponentUse]],
    shipping: Shipping | None,
) -> tuple[str, bool]:
    """How a component under a licence [obligations] combined names (GPL, AGPL) is combined
    with the application, and whether that is refused: loaded into the application's process
    from its main package it makes one program with it, which a proprietary application may
    not be (refused whatever the waivers); in an add-on's own optional package, which the
    application does not require, the distribution is an aggregate (allowed: its source ships
    beside it). ("", False) when its licence binds nothing it is combined with."""
    obliging = sorted(
        {i for _, c in uses if not is_model(c) for i in obliging_ids(c.expression, combined)}
    )
    if not obliging or shipping is None or shipping.license is None:
        return "", False
    ids = " AND ".join(obliging)
    if shipping.addon_of is not None:
        return (
            f"aggregate: {name} ({ids}) ships in {shipping.package}, the add-on's own optional "
            f"package, which {shipping.addon_of} does not require (its packages only suggest "
            f"it); the {shipping.license} application is not conveyed combined with it, and "
            f"its corresponding source ships beside it",
            False,
        )
    if shipping.proprietary:
        return (
            f"{name} is {ids}, and {shipping.product}'s main package {shipping.package} loads "
            f"it into the {shipping.license} application's process: one combined program, "
            f"which {ids} requires to be under its terms (the FSF's GPL FAQ on plugins that "
            f"share the process and its data structures); ship it in an add-on's own optional "
            f'package (a product with addon_of = "{shipping.product}") instead',
            True,
        )
    return (
        f"combined: {name} ({ids}) is loaded into the {shipping.license} application's "
        f"process from {shipping.package}; the application is not proprietary, so the "
        f"combination is conveyed under {ids} (the policy's [[incompatible]] pairs are checked; "
        f"a pair it does not list, a person confirms)",
        False,
    )
