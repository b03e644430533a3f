"""What an auditor reads of the licence audit (ortbundle/licensing/audit.py): the console's
table per channel with every finding under it, the build's one-line summary per channel, and
how many shipped files each rule covers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ortbundle._core.progress import mib
from ortbundle.licensing.attribution import TargetLicensing
from ortbundle.licensing.audit import ChannelAudit, ComponentAudit

if TYPE_CHECKING:
    from rich.console import Console


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f}"


_STYLE = {"ok": "green", "waived": "bold yellow", "review": "yellow", "fail": "bold red"}


def _status_style(c: ComponentAudit) -> str:
    """No green beside what still awaits a person (an unsigned confirmation, a guess)."""
    return "yellow" if c.status == "ok" and c.awaiting else _STYLE[c.status]


def print_report(console: Console, audits: Sequence[ChannelAudit]) -> None:
    """What an auditor reads: per channel, per component, then every waiver relied on."""
    from rich.markup import escape
    from rich.table import Table

    for audit in audits:
        title = f"licence audit — {audit.channel} ({', '.join(audit.targets)})"
        if audit.release:
            title += " — release"
        table = Table(title=title)
        for column in (
            "component",
            "version",
            "licence",
            "files",
            "MiB",
            "text",
            "policy",
            "status",
        ):
            table.add_column(column, justify="right" if column in ("files", "MiB") else "left")
        for c in audit.components:
            table.add_row(
                c.name,
                c.version,
                c.expression,
                str(len(c.files)),
                _mib(c.size),
                "present" if c.text_present else "[bold red]MISSING[/]",
                c.verdict,
                f"[{_status_style(c)}]{c.status.upper()}[/]",
            )
        console.print(table)
        for c in audit.waived:
            for u in c.waiver_uses:
                w = u.waiver
                console.print(
                    f"[bold yellow]WAIVED[/] {audit.channel}: {c.name} {w.file} — {w.license} — "
                    f"{w.reason} — {u.summary()}",
                    highlight=False,
                )
        for c in audit.components:
            for confirmed in c.claims.confirmations:
                console.print(
                    f"[{'green' if confirmed.signed_off else 'bold yellow'}]CONFIRMED[/] "
                    f"{audit.channel}: {c.name}: {escape(confirmed.summary())}",
                    highlight=False,
                )
            for file, library, says, named in c.claims.embedded:
                console.print(
                    escape(
                        f"EMBEDDED {audit.channel}: {c.name}: {file} carries {library} ({says!r}; "
                        f"{'named in ' + ', '.join(named) if named else 'no notice names it'})"
                    ),
                    highlight=False,
                )
        for c in audit.components:
            if c.combination and c.status != "fail":  # (a refusal is among the FAIL lines)
                console.print(
                    f"COMBINATION {audit.channel}: {c.name}: {escape(c.combination)}",
                    highlight=False,
                )
        for c in audit.components:
            if c.status == "review":
                for p in c.said:
                    console.print(
                        f"[yellow]REVIEW[/] {audit.channel}: {c.name}: {escape(p)}",
                        highlight=False,
                    )
                for snippet in c.claims.tables:  # each file's SHA-256, to paste once reviewed
                    console.print(
                        f"{c.name}: once a person has reviewed these files, confirm them:",
                        highlight=False,
                    )
                    console.print(escape(snippet), highlight=False)
        for w in audit.unused_waivers:
            console.print(
                f"[yellow]UNUSED WAIVER[/] {audit.channel}: {w.file} matches no shipped file",
                highlight=False,
            )
        for failure in audit.failures:
            console.print(f"[bold red]FAIL[/] {audit.channel}: {escape(failure)}", highlight=False)
        style = (
            "green" if audit.headline == "passed" else "bold yellow" if audit.passed else "bold red"
        )
        verdict = f"[{style}]{escape(audit.headline)}[/]"
        console.print(f"{audit.channel}: audit {verdict}", highlight=False)


def audit_summary(audits: Sequence[ChannelAudit]) -> list[str]:
    """The lines a later no-op build repeats: every waiver relied on, every verdict."""
    lines = []
    for audit in audits:
        for c in audit.waived:
            for u in c.waiver_uses:
                w = u.waiver
                lines.append(
                    f"WAIVED {audit.channel}: {c.name} {w.file} — {w.license} — {w.reason} — "
                    f"{u.summary()}"
                )
        lines += [
            f"UNUSED WAIVER {audit.channel}: {w.file} matches no shipped file: remove it from "
            f"{f'manifests/{w.manifest}' if w.manifest else 'the product manifest'}, or "
            "correct its file glob"
            for w in audit.unused_waivers
        ]
        lines.append(f"{audit.channel}: audit {audit.headline}")
    return lines


def coverage_lines(licensing: Sequence[TargetLicensing]) -> list[str]:

    lines = []
    for tl in licensing:
        files = [f for c in tl.components for f in c.files if f.link_to is None]
        texts = [t for c in tl.components for t in c.texts]
        size = sum(f.size for f in files) + sum(t.size for t in texts)
        lines.append(
            f"{tl.target}: {len(files) + len(texts)} files, {mib(size)}, 100% attributed to "
            f"{len(tl.components)} components"
        )
    return lines
