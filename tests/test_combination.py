"""The product's licence and how a copyleft component is combined with it: a GPL plugin loaded
into a proprietary application from its main package is refused (whatever the waivers), the
same plugin in an add-on's own optional package is an aggregate, and a GPL application combines
it; the audit report gives the reasoning."""

from __future__ import annotations

import json

import pytest

from ortbundle._core.progress import Reporter
from ortbundle.evidence.names import AUDIT_NAME
from ortbundle.licensing.audit import ComponentAudit
from ortbundle.pipeline.build import build
from ortbundle.pipeline.result import BuildResult
from tests.helpers.project import FakeProject
from tests.test_source_obligations import LINUX, gpl

MAIN = """\
[product]
name = "mainapp"
version = "1.2.3"
description = "The application"
url = "https://example.invalid/"
targets = ["linux-x86_64"]
runtimes = ["fake"]

[packaging]
package_name = "mainapp-onnxruntime"
"""


def audited(
    fake: FakeProject, reporter: Reporter, licence: str, *, addon: bool, extra: str = ""
) -> BuildResult:
    fake.product_extra = f'license = "{licence}"\n' + ('addon_of = "mainapp"\n' if addon else "")
    fake.product_extra += extra
    gpl(fake)
    if addon:
        (fake.root / "manifests" / "mainapp.toml").write_text(MAIN)
    return build(fake.project, fake.options(targets=LINUX), reporter)


def row(result: BuildResult, channel: str = "arch") -> ComponentAudit:
    audit = next(a for a in result.audits if a.channel == channel)
    return next(c for c in audit.components if c.name == "fake")


def test_a_gpl_plugin_in_a_proprietary_main_package_is_refused(
    fake: FakeProject, reporter: Reporter
) -> None:
    result = audited(fake, reporter, "LicenseRef-Proprietary", addon=False)
    refused = row(result)
    assert refused.status == "fail"
    assert refused.problems[0] == refused.combination
    assert refused.combination.startswith(
        "fake is GPL-3.0-or-later, and fakeproduct's main package fakeproduct-onnxruntime loads "
        "it into the LicenseRef-Proprietary application's process: one combined program"
    )
    assert 'addon_of = "fakeproduct"' in refused.combination
    report = json.loads((result.version_dir / AUDIT_NAME).read_text())
    arch = next(c for c in report["channels"] if c["channel"] == "arch")
    assert arch["components"][0]["combination"] == refused.combination
    assert not arch["passed"]


def test_a_waiver_does_not_allow_the_combination(fake: FakeProject, reporter: Reporter) -> None:
    waiver = (
        '\n[[waivers]]\nfile = "runtimes/fake/*"\nlicense = "GPL-3.0-or-later"\n'
        'reason = "reviewed"\nreviewer = "A Person"\n'
    )
    result = audited(fake, reporter, "LicenseRef-Proprietary", addon=False, extra=waiver)
    assert row(result).status == "fail"


def test_in_an_addons_own_package_it_is_an_aggregate(fake: FakeProject, reporter: Reporter) -> None:
    result = audited(fake, reporter, "LicenseRef-Proprietary", addon=True)
    aggregate = row(result)
    assert aggregate.status != "fail"
    assert not any("combined program" in p for p in aggregate.problems)
    assert aggregate.combination.startswith(
        "aggregate: fake (GPL-3.0-or-later) ships in fakeproduct-onnxruntime, the add-on's own "
        "optional package, which mainapp does not require"
    )


@pytest.mark.parametrize("licence", ["GPL-3.0-or-later", "MIT"])
def test_an_application_under_an_spdx_licence_combines_it(
    fake: FakeProject, reporter: Reporter, licence: str
) -> None:
    result = audited(fake, reporter, licence, addon=False)
    combined = row(result)
    assert combined.status != "fail"
    assert combined.combination.startswith(
        f"combined: fake (GPL-3.0-or-later) is loaded into the {licence}"
    )


def test_an_unstated_product_licence_judges_nothing(fake: FakeProject, reporter: Reporter) -> None:
    gpl(fake)
    result = build(fake.project, fake.options(targets=LINUX), reporter)
    assert row(result).combination == ""
