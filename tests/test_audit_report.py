"""What the licence audit tells a person and a later build, read directly: the report printed per
channel (the table, then every WAIVED, CONFIRMED, EMBEDDED, REVIEW, UNUSED WAIVER and FAIL line
and the verdict), the summary a no-op build repeats, the coverage lines and audit.json.

The console is a recorder: each table and line is compared whole, markup and styles included, so
a changed word, column or colour fails a test that names it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ortbundle.config.recipes import Confirmation
from ortbundle.licensing.attribution import TargetLicensing
from ortbundle.licensing.audit import AUDIT_SCHEMA, ChannelAudit, report_json
from ortbundle.licensing.audit_print import audit_summary, coverage_lines, print_report
from ortbundle.licensing.file_findings import Mention, ShippedEvidence
from ortbundle.stage.file_facts import Embedded, FileEvidence
from ortbundle.stage.staging import StagedText
from tests.helpers.audit_inputs import WIN, A, B, C, audit, staged, use, waiver


class Recorder(Console):
    """A console that keeps what it is given to print, with how."""

    def __init__(self) -> None:
        super().__init__()
        self.printed: list[tuple[Any, dict[str, Any]]] = []

    def print(self, *objects: Any, **kwargs: Any) -> None:
        (one,) = objects
        self.printed.append((one, kwargs))

    def lines(self) -> list[str]:
        """Each line printed, asserting it was printed as text without highlighting."""
        out = []
        for one, kwargs in self.printed:
            if isinstance(one, Table):
                out.append("<table>")
                continue
            assert kwargs == {"highlight": False}, one
            out.append(one)
        return out

    def tables(self) -> list[Table]:
        return [one for one, kwargs in self.printed if isinstance(one, Table) and not kwargs]


def cells(table: Table) -> list[tuple[Any, ...]]:
    return list(zip(*(column._cells for column in table.columns), strict=True))


HEADERS = [
    ("component", "left"),
    ("version", "left"),
    ("licence", "left"),
    ("files", "right"),
    ("MiB", "right"),
    ("text", "left"),
    ("policy", "left"),
    ("status", "left"),
]

SIGNED = waiver(file="runtimes/w/w.dll", license="LicenseRef-Vendor", reason="EULA read")
UNSIGNED = waiver(file="runtimes/u/u.dll", license="LicenseRef-Vendor", reviewer="TBD")
UNUSED = waiver(file="nothing/*.dll", manifest="")
CONFIRMED = Confirmation("Ada Lovelace", "compared", (C,), date(2026, 11, 2))
NV = FileEvidence(
    format="pe", company="NVIDIA Corporation", copyrights=("Copyright (c) NVIDIA Corporation",)
)
CARRIES = FileEvidence(
    format="elf",
    embedded=(
        Embedded("curl", "A libcurl function was given a bad argument"),
        Embedded("zlib", "deflate 1.3.1 Copyright 1995-2024 Jean-loup Gailly and Mark Adler"),
    ),
)


def release_audit() -> ChannelAudit:
    """One of each row a release can refuse, and one that passes."""
    confirmed = use(
        "c",
        files=(staged("runtimes/c/c.dll", sha=C, size=3 << 19),),
        evidence=(ShippedEvidence("runtimes/c/c.dll", C, NV),),
        confirmed=CONFIRMED,
    )
    carrying = use(
        "e",
        files=(staged("runtimes/e/e.dll", size=5),),
        evidence=(
            ShippedEvidence(
                "runtimes/e/e.dll",
                A,
                CARRIES,
                (Mention("zlib", ("licenses/e/LICENSE", "NOTICE")),),
            ),
        ),
    )
    return audit(
        use("a", files=(staged("runtimes/a/a.dll", size=0),)),
        use("b", "GPL-2.0-only"),
        confirmed,
        use("d", "LicenseRef-Bad", text=False),
        carrying,
        use("u", "LicenseRef-Vendor", version="2.0", files=(staged("runtimes/u/u.dll"),)),
        use("w", "LicenseRef-Vendor", files=(staged("runtimes/w/w.dll"),)),
        waivers=(SIGNED, UNSIGNED, UNUSED),
        release=True,
    )


def test_the_report_prints_the_table_then_every_line_a_person_must_read() -> None:
    console = Recorder()
    channel = release_audit()
    deb = replace(audit(use()), channel="deb", targets=(WIN, "windows-arm64"))
    print_report(console, [channel, deb])
    nsis_table, deb_table = console.tables()
    assert nsis_table.title == f"licence audit — nsis ({WIN}) — release"
    assert [(c.header, c.justify) for c in nsis_table.columns] == HEADERS
    assert cells(nsis_table) == [
        ("a", "1", "MIT", "1", "0.0", "present", "allow", "[green]OK[/]"),
        ("b", "1", "GPL-2.0-only", "1", "1.0", "present", "review", "[yellow]REVIEW[/]"),
        ("c", "1", "MIT", "1", "1.5", "present", "allow", "[green]OK[/]"),
        (
            "d",
            "1",
            "LicenseRef-Bad",
            "1",
            "1.0",
            "[bold red]MISSING[/]",
            "refuse",
            "[bold red]FAIL[/]",
        ),
        ("e", "1", "MIT", "1", "0.0", "present", "allow", "[yellow]REVIEW[/]"),
        (
            "u",
            "2.0",
            "LicenseRef-Vendor",
            "1",
            "1.0",
            "present",
            "review",
            "[bold yellow]WAIVED[/]",
        ),
        ("w", "1", "LicenseRef-Vendor", "1", "1.0", "present", "review", "[bold yellow]WAIVED[/]"),
    ]
    assert deb_table.title == f"licence audit — deb ({WIN}, windows-arm64)"
    assert cells(deb_table) == [("x", "1", "MIT", "1", "1.0", "present", "allow", "[green]OK[/]")]
    unsigned = channel.components[5].waiver_uses[0]
    e_problems = channel.components[4].problems
    assert len(e_problems) == 1 and "[[targets.windows-x86_64.licenses]]" in e_problems[0]
    escaped_e = escape(e_problems[0])
    assert escaped_e != e_problems[0]
    assert console.lines() == [
        "<table>",
        "[bold yellow]WAIVED[/] nsis: u runtimes/u/u.dll — LicenseRef-Vendor — terms read — "
        f"reviewed by TBD — NOT SIGNED OFF: {'; '.join(unsigned.problems)}",
        "[bold yellow]WAIVED[/] nsis: w runtimes/w/w.dll — LicenseRef-Vendor — EULA read — "
        f"reviewed by Jane Reviewer on 2026-11-30, expires 2027-05-31, sha256 {A}",
        f"[green]CONFIRMED[/] nsis: c: {WIN}/runtimes/c/c.dll: confirmed by Ada Lovelace on "
        "2026-11-02 — compared",
        f"EMBEDDED nsis: e: {WIN}/runtimes/e/e.dll carries curl ('A libcurl function was given "
        "a bad argument'; no notice names it)",
        f"EMBEDDED nsis: e: {WIN}/runtimes/e/e.dll carries zlib ('deflate 1.3.1 Copyright "
        "1995-2024 Jean-loup Gailly and Mark Adler'; named in NOTICE, licenses/e/LICENSE)",
        "[yellow]REVIEW[/] nsis: b: licence GPL-2.0-only needs review on the nsis channel",
        f"[yellow]REVIEW[/] nsis: e: {escaped_e}",
        # and the table that confirms it once a person has reviewed the file, its SHA-256 in it
        "e: once a person has reviewed these files, confirm them:",
        escape(channel.components[4].claims.tables[0]),
        "[yellow]UNUSED WAIVER[/] nsis: nothing/*.dll matches no shipped file",
        *(f"[bold red]FAIL[/] nsis: {escape(f)}" for f in channel.failures),
        "nsis: audit [bold red]FAILED[/]",
        "<table>",
        "deb: audit [green]passed[/]",
    ]
    # d refused and without text, b and e under review, u not signed off, one waiver unused
    assert len(channel.failures) == 6


def test_a_confirmation_not_signed_off_is_printed_so() -> None:
    console = Recorder()
    placeholder = replace(CONFIRMED, reviewer="TBD")
    evidence = (ShippedEvidence("runtimes/c/c.dll", C, NV),)
    unsigned = audit(use("c", evidence=evidence, confirmed=placeholder))
    print_report(console, [unsigned])
    assert console.lines()[1] == (
        # not green: a confirmation no one signed off awaits a person (issue #43)
        f"[bold yellow]CONFIRMED[/] nsis: c: {WIN}/runtimes/c/c.dll: confirmed by TBD — NOT SIGNED OFF: "
        "the reviewer is a placeholder ('TBD'), not a person"
    )
    # nor in report.html's evidence row or the headline
    (row,) = unsigned.components[0].claims.rows()
    assert row.state == "unsigned"
    assert unsigned.headline == (
        "passes for development; 1 confirmation unsigned: `--release` will refuse"
    )
    signed = audit(use("c", evidence=evidence, confirmed=CONFIRMED))
    assert [r.state for r in signed.components[0].claims.rows()] == ["confirmed"]
    assert signed.headline == "passed"


def test_a_report_of_markup_like_names_prints_them_as_text() -> None:
    console = Recorder()
    carries = FileEvidence(format="elf", embedded=(Embedded("[red]x", "[b]"),))
    evidence = (ShippedEvidence("runtimes/c/c.dll", C, carries),)
    print_report(console, [audit(use("c", evidence=evidence))])
    assert console.lines()[1] == (
        f"EMBEDDED nsis: c: {WIN}/runtimes/c/c.dll carries \\[red]x ('\\[b]'; no notice names it)"
    )


def test_the_summary_repeats_every_waiver_relied_on_and_each_verdict() -> None:
    channel = release_audit()
    passed = replace(audit(use()), channel="deb")
    manifest = replace(audit(use(), waivers=(waiver(file="gone.dll"),)), channel="rpm")
    unsigned = channel.components[5].waiver_uses[0]
    assert audit_summary([channel, passed, manifest]) == [
        "WAIVED nsis: u runtimes/u/u.dll — LicenseRef-Vendor — terms read — reviewed by TBD — "
        f"NOT SIGNED OFF: {'; '.join(unsigned.problems)}",
        "WAIVED nsis: w runtimes/w/w.dll — LicenseRef-Vendor — EULA read — reviewed by Jane "
        f"Reviewer on 2026-11-30, expires 2027-05-31, sha256 {A}",
        "UNUSED WAIVER nsis: nothing/*.dll matches no shipped file: remove it from the product "
        "manifest, or correct its file glob",
        "nsis: audit FAILED",
        "deb: audit passed",
        "UNUSED WAIVER rpm: gone.dll matches no shipped file: remove it from manifests/default.toml, "
        "or correct its file glob",
        # an unused waiver is a person's work: passed only for development (issue #43)
        "rpm: audit passes for development; 1 waiver matches no file: `--release` will refuse",
    ]


def test_coverage_counts_each_targets_own_files_and_texts() -> None:
    link = staged("runtimes/x/x.so", size=7, link="x.dll")
    two_texts = replace(
        use("y", files=(staged("runtimes/y/y.dll", size=1 << 19),)),
        texts=(
            StagedText("y", "licenses/y/LICENSE", "LICENSE", 1 << 18, B),
            StagedText("y", "licenses/y/NOTICE", "NOTICE", 1 << 18, B),
        ),
    )
    licensing = [
        TargetLicensing(WIN, (use(files=(staged(), link)), two_texts)),
        TargetLicensing("linux-x86_64", ()),
    ]
    assert coverage_lines(licensing) == [
        f"{WIN}: 5 files, 2.0 MiB, 100% attributed to 2 components",
        "linux-x86_64: 0 files, 0.0 MiB, 100% attributed to 0 components",
    ]


def test_audit_json_holds_every_verdict_waiver_and_attributed_file() -> None:
    link = staged("runtimes/w/w.so", sha=B, size=0, link="w.dll")
    shipped = use("w", "LicenseRef-Vendor", files=(staged("runtimes/w/w.dll"), link))
    dated = waiver(
        file="runtimes/w/w.dll",
        license="LicenseRef-Vendor",
        targets=(WIN,),
        channels=("nsis",),
    )
    undated = waiver(file="nothing", reviewed=None, expires=None, sha256=(A, B))
    channel = audit(shipped, use("a"), waivers=(dated, undated), release=True)
    clean = replace(audit(use("a")), channel="deb")
    licensing = [
        TargetLicensing(WIN, (use("a"), shipped)),
        TargetLicensing("linux-x86_64", ()),
    ]
    text = report_json("demo", "1.2.3", [channel, clean], licensing)
    document = json.loads(text)
    assert text == json.dumps(document, indent=2, sort_keys=True) + "\n"
    no_claims: dict[str, list[Any]] = {
        "evidence": [],
        "embedded": [],
        "confirmations": [],
        "guessed": [],
    }
    waiver_json = {
        "file": "runtimes/w/w.dll",
        "license": "LicenseRef-Vendor",
        "reason": "terms read",
        "reviewer": "Jane Reviewer",
        "targets": [WIN],
        "channels": ["nsis"],
        "sha256": [A],
        "reviewed": "2026-11-30",
        "expires": "2027-05-31",
    }
    a_row = {
        "name": "a",
        "version": "1",
        "license": "MIT",
        "purl": "pkg:generic/a@1",
        "files": [f"{WIN}/runtimes/a/a.dll"],
        "size": 1 << 20,
        "texts": [f"{WIN}/licenses/a/LICENSE"],
        "text_present": True,
        "policy": "allow",
        "status": "ok",
        "problems": [],
        "waivers": [],
        **no_claims,
    }
    assert document == {
        "schema": AUDIT_SCHEMA,
        "product": {"name": "demo", "version": "1.2.3"},
        "passed": False,
        "attribution": [
            {
                "target": WIN,
                "files": [
                    {"path": "licenses/a/LICENSE", "size": 10, "component": "a"},
                    {"path": "licenses/w/LICENSE", "size": 10, "component": "w"},
                    {"path": "runtimes/a/a.dll", "size": 1 << 20, "component": "a"},
                    {"path": "runtimes/w/w.dll", "size": 1 << 20, "component": "w"},
                    {"path": "runtimes/w/w.so", "size": 0, "component": "w"},
                ],
            },
            {"target": "linux-x86_64", "files": []},
        ],
        "channels": [
            {
                "channel": "nsis",
                "targets": [WIN],
                "release": True,
                "passed": False,
                "headline": "FAILED",
                "failures": ["waiver for nothing matches no shipped file"],
                "components": [
                    a_row,
                    {
                        "name": "w",
                        "version": "1",
                        "license": "LicenseRef-Vendor",
                        "purl": "pkg:generic/w@1",
                        "files": [f"{WIN}/runtimes/w/w.dll", f"{WIN}/runtimes/w/w.so"],
                        "size": 1 << 20,
                        "texts": [f"{WIN}/licenses/w/LICENSE"],
                        "text_present": True,
                        "policy": "review",
                        "status": "waived",
                        "problems": ["licence LicenseRef-Vendor needs review on the nsis channel"],
                        "waivers": [
                            {
                                **waiver_json,
                                "covers": [{"path": f"{WIN}/runtimes/w/w.dll", "sha256": A}],
                                "signed_off": True,
                                "signoff_problems": [],
                            }
                        ],
                        **no_claims,
                    },
                ],
                "unused_waivers": [
                    {
                        **waiver_json,
                        "file": "nothing",
                        "license": "GPL-2.0-only",
                        "targets": [],
                        "channels": [],
                        "sha256": [A, B],
                        "reviewed": None,
                        "expires": None,
                    }
                ],
            },
            {
                "channel": "deb",
                "targets": [WIN],
                "release": False,
                "passed": True,
                "headline": "passed",
                "failures": [],
                "components": [a_row],
                "unused_waivers": [],
            },
        ],
    }
    assert json.loads(report_json("demo", "1.2.3", [clean], licensing))["passed"] is True


def test_audit_json_carries_each_rows_claims() -> None:
    evidence = (ShippedEvidence("runtimes/c/c.dll", C, NV),)
    channel = audit(use("c", evidence=evidence, confirmed=CONFIRMED, guessed=("files",)))
    (row,) = json.loads(report_json("demo", "1", [channel], []))["channels"][0]["components"]
    claims = channel.components[0].claims.to_json()
    assert {k: row[k] for k in claims} == json.loads(json.dumps(claims))
    assert len(row["evidence"]) == 1 and len(row["confirmations"]) == 1
    assert row["guessed"] == [channel.components[0].claims.guesses[0]]
