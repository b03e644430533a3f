"""Licences no one program may carry together, refused whatever the packaging.

A GPL-2.0-only component and Apache-2.0 code loaded into one process make one program that no
one may convey (the FSF's licence list: Apache-2.0's patent terms are further restrictions
GPLv2 §6 forbids); GPL-2.0-only and GPLv3 code likewise. Which pairs clash is policy data
(licenses/policy.toml `[[incompatible]]`, each with its reason and source). A process is what
the loader puts together: one runtime's core with the plugin EPs, custom-op libraries and
libraries using a core paired with it, and the application itself when its `[product] license`
is an SPDX id. Models are data, never part of it. A clash fails every channel that carries
the target, with the reason; no waiver stands in for it, and an add-on's own package does not
help (the add-on's runtime still runs in the application's process).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from ortbundle.config.products import Product
from ortbundle.config.vocabulary import KIND_DIRECTORIES
from ortbundle.licensing.attribution import ComponentUse, TargetLicensing
from ortbundle.licensing.audit import ChannelAudit
from ortbundle.licensing.combining import Incompatible
from ortbundle.licensing.obligations import is_model, obliging_ids

__all__ = ["Clash", "clashes", "with_clashes"]


@dataclass(frozen=True)
class Clash:
    """Two parties of one process under licences that cannot be combined."""

    target: str
    process: str  # the runtime whose process it is
    parties: tuple[tuple[str, str], tuple[str, str]]  # (component, its clashing ids) x 2
    rule: Incompatible

    @property
    def components(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.parties)

    def line(self) -> str:
        (a, ids_a), (b, ids_b) = self.parties
        return (
            f"incompatible: {a} ({ids_a}) and {b} ({ids_b}) run in one process on "
            f"{self.target} (the {self.process} runtime and what pairs with it): {self.rule.why} "
            f"({self.rule.source}); refused whatever the packaging, and no waiver stands in"
        )


def _processes(product: Product, target: TargetLicensing) -> dict[str, list[ComponentUse]]:
    """Each runtime of the target and the components the loader loads with it: those with a
    file in its directory or in the directory of a component paired with it."""
    companions: dict[str, list[str]] = {}
    for kind in ("plugin-ep", "custom-ops", "uses-core"):
        for name, runtimes in product.pairing(kind).items():
            for runtime in runtimes:
                companions.setdefault(runtime, []).append(f"{KIND_DIRECTORIES[kind]}/{name}/")
    out: dict[str, list[ComponentUse]] = {}
    for runtime in product.runtimes_for(target.target):
        places = (f"{KIND_DIRECTORIES['runtime']}/{runtime}/", *companions.get(runtime, ()))
        out[runtime] = [
            c
            for c in target.components
            if not is_model(c) and any(f.path.startswith(places) for f in c.files)
        ]
    return out


def clashes(
    rules: Sequence[Incompatible], product: Product, licensing: Sequence[TargetLicensing]
) -> tuple[Clash, ...]:
    """Every pair of parties of one process whose licences a rule says cannot be combined."""
    found: list[Clash] = []
    for target in licensing:
        for runtime, members in _processes(product, target).items():
            parties = [(c.name, c.expression) for c in members]
            if product.license and not product.license.startswith("LicenseRef-"):
                parties.append((f"the application {product.name}", product.license))
            for rule in rules:
                for a, expression_a in parties:
                    ids_a = obliging_ids(expression_a, rule.first)
                    if not ids_a:
                        continue
                    for b, expression_b in parties:
                        ids_b = obliging_ids(expression_b, rule.second)
                        if ids_b:
                            pair = ((a, " AND ".join(ids_a)), (b, " AND ".join(ids_b)))
                            found.append(Clash(target.target, runtime, pair, rule))
    return tuple(dict.fromkeys(found))


def with_clashes(
    audits: Sequence[ChannelAudit], found: Sequence[Clash]
) -> tuple[ChannelAudit, ...]:
    """Each channel's audit with every component of a clash on a target it carries failed,
    the clash first among its problems."""
    out = []
    for audit in audits:
        lines: dict[str, list[str]] = {}
        for clash in found:
            if clash.target in audit.targets:
                for name in clash.components:
                    lines.setdefault(name, []).append(clash.line())
        if not lines:
            out.append(audit)
            continue
        components = tuple(
            dataclasses.replace(
                c, status="fail", problems=(*dict.fromkeys(lines[c.name]), *c.problems)
            )
            if c.name in lines
            else c
            for c in audit.components
        )
        out.append(dataclasses.replace(audit, components=components))
    return tuple(out)
