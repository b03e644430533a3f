"""Licences no one program may carry together (licenses/policy.toml [[incompatible]]): GPL-2.0
only with Apache-2.0 code in one process is refused whatever the packaging, the waivers or the
product's licence; GPL-3.0 with Apache-2.0 is not such a pair. The application counts as a party
when its licence is an SPDX id."""

from __future__ import annotations

import pytest

from ortbundle._core.progress import Reporter
from ortbundle.licensing.audit import ComponentAudit
from ortbundle.pipeline.build import build
from ortbundle.pipeline.result import BuildResult
from tests.helpers.project import FakeProject
from tests.helpers.source_archives import pin_sources
from tests.test_combination import MAIN
from tests.test_source_obligations import LINUX

GPL2 = b"GNU GENERAL PUBLIC LICENSE\nVersion 2, June 1991\n\nCopyright (C) Fake Corp\n"


def licensed(fake: FakeProject, expression: str) -> FakeProject:
    """The fake runtime's Linux files under `expression` (with a GPL text), sources pinned."""
    fake.linux["onnxruntime/LICENSE"] = GPL2
    fake.write()
    recipe = fake.root / "recipes" / "fake.toml"
    recipe.write_text(
        recipe.read_text().replace(
            'expression = "MIT"\nfiles = ["lib*"]', f'expression = "{expression}"\nfiles = ["lib*"]'
        )
    )
    pin_sources(fake)
    return fake


def audited(
    fake: FakeProject,
    reporter: Reporter,
    expression: str,
    *,
    product: str = "",
    addon: bool = False,
) -> BuildResult:
    fake.product_extra = product + ('addon_of = "mainapp"\n' if addon else "")
    licensed(fake, expression)
    if addon:
        (fake.root / "manifests" / "mainapp.toml").write_text(MAIN)
    return build(fake.project, fake.options(targets=LINUX), reporter)


def rows(result: BuildResult) -> dict[str, ComponentAudit]:
    """The fake runtime's row on each channel."""
    return {a.channel: next(c for c in a.components if c.name == "fake") for a in result.audits}


CLASH = (
    "incompatible: fake (GPL-2.0-only) and fake (Apache-2.0) run in one process on "
    "linux-x86_64 (the fake runtime and what pairs with it): Apache-2.0's patent termination "
    "and indemnity terms are further restrictions GPL-2.0 §6 forbids"
)


@pytest.mark.parametrize("addon", [False, True], ids=["main package", "add-on's own package"])
def test_gpl2_only_with_apache_code_linked_in_is_refused_on_every_channel(
    fake: FakeProject, reporter: Reporter, addon: bool
) -> None:
    product = 'license = "LicenseRef-Proprietary"\n'
    result = audited(fake, reporter, "GPL-2.0-only AND Apache-2.0", product=product, addon=addon)
    found = rows(result)
    assert found, "no channel audited the runtime"
    for channel, row in found.items():
        assert row.status == "fail", channel
        assert row.problems[0].startswith(CLASH), row.problems


def test_a_waiver_does_not_stand_in_for_it(fake: FakeProject, reporter: Reporter) -> None:
    waiver = (
        '\n[[waivers]]\nfile = "runtimes/fake/*"\nlicense = "GPL-2.0-only AND Apache-2.0"\n'
        'reason = "reviewed"\nreviewer = "A Person"\n'
    )
    result = audited(fake, reporter, "GPL-2.0-only AND Apache-2.0", product=waiver)
    assert {row.status for row in rows(result).values()} == {"fail"}


def clash_lines(result: BuildResult) -> list[str]:
    """Every channel's incompatibility lines for the fake runtime; the audit ran somewhere."""
    found = rows(result)
    assert found, "no channel audited the runtime"
    return [p for row in found.values() for p in row.problems if p.startswith("incompatible:")]


def test_gpl3_with_apache_code_is_no_such_pair(fake: FakeProject, reporter: Reporter) -> None:
    result = audited(fake, reporter, "GPL-3.0-or-later AND Apache-2.0")
    assert clash_lines(result) == []


def test_an_or_that_offers_a_way_out_is_no_clash(fake: FakeProject, reporter: Reporter) -> None:
    result = audited(fake, reporter, "GPL-2.0-only AND (Apache-2.0 OR MIT)")
    assert clash_lines(result) == []


def test_a_gpl2_only_application_with_an_apache_runtime_is_refused(
    fake: FakeProject, reporter: Reporter
) -> None:
    result = audited(fake, reporter, "Apache-2.0", product='license = "GPL-2.0-only"\n')
    found = rows(result)
    assert found and {row.status for row in found.values()} == {"fail"}
    for row in found.values():
        assert row.problems[0].startswith(
            "incompatible: the application fakeproduct (GPL-2.0-only) and fake (Apache-2.0) run "
            "in one process on linux-x86_64"
        ), row.problems
