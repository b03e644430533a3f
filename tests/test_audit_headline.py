"""The audit's headline is the truth (issue #43): "passed" only when nothing awaits a person,
else one line saying what does — the same words in the console, build-summary.json and
report.html, with no green beside REVIEW, MISSING or NOT SIGNED OFF, and a fix several files
share said once."""

from __future__ import annotations

import json
import re

import pytest

from ortbundle.cli.build import run_build
from tests.helpers.pe import make_pe
from tests.helpers.project import FakeProject, windows_members
from tests.test_waivers import SECRET

HEADLINE = (
    "passes for development; 2 files await review, 1 waiver unsigned, 1 text missing: "
    "`--release` will refuse"
)
# two DLLs of the fake runtime carry protobuf, which its MIT text does not name: one REVIEW
# finding each, with the same fix
FRONTENDS = ("frontend_a.dll", "frontend_b.dll")


def _awaiting_a_person(fake: FakeProject) -> FakeProject:
    """The Windows target ships two files awaiting review and secret.dll, whose text is
    missing, under a waiver nobody signed off."""
    fake.windows = windows_members()
    fake.windows["onnxruntime/capi/secret.dll"] = SECRET
    for name in FRONTENDS:
        fake.windows[f"onnxruntime/capi/{name}"] = make_pe(
            imports=("KERNEL32.dll",),
            payload=f"google/protobuf/io/coded_stream.cc {name}".encode(),
        )
    fake.windows_roots = ["onnxruntime.dll", "secret.dll", *FRONTENDS]
    fake.windows_licenses = """
[[targets.windows-x86_64.licenses]]
component = "fake"
version = "1.0.0"
expression = "MIT"
files = ["[!s]*.dll"]
texts = [{ source = "windows", member = "onnxruntime/LICENSE" }]

[[targets.windows-x86_64.licenses]]
component = "secret"
version = "2.0"
expression = "LicenseRef-Secret"
files = ["secret.dll"]
texts = []
"""
    fake.product_extra = (
        '\n[[waivers]]\nfile = "runtimes/fake/secret.dll"\nlicense = "LicenseRef-Secret"\n'
        'targets = ["windows-x86_64"]\nreason = "the vendor sent its terms by mail"\n'
        'reviewer = "unassigned: a person must read the terms"\n'
    )
    return fake.write()


@pytest.mark.slow
def test_the_headline_says_what_awaits_a_person_in_every_output(
    fake: FakeProject, capsys: pytest.CaptureFixture[str]
) -> None:
    _awaiting_a_person(fake)
    capsys.readouterr()
    run_build(fake.options(), root=fake.root)
    console = capsys.readouterr().out.splitlines()
    version_dir = fake.root / "dist" / "fakeproduct" / "1.2.3"

    # the console: the Linux channels passed; the Windows one says what waits, never "passed"
    (linux,) = [line for line in console if line.startswith("  audit passed: ")]
    assert linux.startswith("  audit passed: arch, flatpak, deb, rpm ("), console
    (nsis,) = [line for line in console if line.startswith("  audit nsis ")]
    assert nsis.endswith(f"): {HEADLINE}"), nsis
    assert not [line for line in console if "passed" in line and "nsis" in line], console
    # the fix both frontends share is said once, after both files
    reviews = [line for line in console if line.startswith("  REVIEW fake: ")]
    assert len(reviews) == 1, reviews
    assert all(f"windows-x86_64/runtimes/fake/{name}" in reviews[0] for name in FRONTENDS)
    assert reviews[0].count("add a text that names protobuf") == 1, reviews[0]
    assert "for each of these 2 files: add a text that names protobuf" in reviews[0]

    # build-summary.json says the same words
    summary = json.loads((version_dir / "build-summary.json").read_text("utf-8"))
    (entry,) = [a for a in summary["audit"] if a["channels"] == ["nsis"]]
    assert (entry["passed"], entry["headline"]) == (True, HEADLINE)
    assert entry["awaiting"] == ["2 files await review", "1 waiver unsigned", "1 text missing"]
    assert entry["review"] == [reviews[0].removeprefix("  REVIEW ")]

    # report.html: the same headline, not green, and nothing green beside what waits
    html = (version_dir / "report.html").read_text("utf-8")
    start = html.index('<div class="audit" data-channels="nsis">')
    section = html[start : html.index("</div>", start)]
    heading = section[: section.index("</h3>")]
    assert f'<span class="headline review">{_escaped(HEADLINE)}</span>' in heading, heading
    assert "passed" not in heading and 'class="ok"' not in heading
    rows = dict(re.findall(r'<tr class="\w+" data-component="(\w+)">(.*?)</tr>', section))
    assert "MISSING" in rows["secret"] and "WAIVED" in rows["secret"]
    assert ">REVIEW<" in rows["fake"]
    for name in ("secret", "fake"):  # beside MISSING, NOT SIGNED OFF or REVIEW
        assert 'class="ok"' not in rows[name] and "confirmed" not in rows[name], rows[name]
    waiver = re.search(r'<p class="waiver">.*?</p>', section, re.S)
    assert waiver and "NOT SIGNED OFF" in waiver[0] and "confirmed" not in waiver[0]
    assert section.count("add a text that names protobuf") == 1


def _escaped(text: str) -> str:
    """As Jinja2's autoescape writes it."""
    return text.replace("&", "&amp;").replace("'", "&#39;").replace('"', "&#34;")
