"""invoke build, audit, fetch and clean: a build (or a no-op), its summary and details."""

from __future__ import annotations

import errno
import functools
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ortbundle._core.fsio import atomic_write
from ortbundle._core.words import plural
from ortbundle.cli.common import ROOT, CommandFailed, guard, headline, write_places_of
from ortbundle.config.project import BuildOptions, Project

FETCHED_AGAIN = "fetched again"  # what a build does with a cache entry that failed its hash

if TYPE_CHECKING:
    from ortbundle._core.progress import Reporter
    from ortbundle.pipeline.incremental import PreparedBuild
    from ortbundle.pipeline.result import BuildResult


def _build_or_report(
    project: Project,
    options: BuildOptions,
    reporter: Reporter,
    prepared: PreparedBuild | None = None,
) -> BuildResult:
    from ortbundle.pipeline.build import AuditFailed, build
    from ortbundle.pipeline.console import print_audit

    try:
        return build(project, options, reporter, prepared)
    except AuditFailed as failed:
        print_audit(reporter.console, failed.audits)
        raise


def run_build(
    options: BuildOptions,
    *,
    root: Path = ROOT,
    dist: Path | None = None,
    verbose: bool = False,
    as_json: bool = False,
) -> None:
    """Build, then one summary: concise lines by default, the detail tables with `verbose`, the
    JSON document (build-summary.json) on stdout with `as_json` (progress then goes to stderr)."""
    from ortbundle.pipeline.noop import quick_previous

    project = Project.at(root, dist)
    places = functools.partial(write_places_of, project, options)  # asked only on an OS error
    # nothing moved since the last build: said without planning (ortbundle/pipeline/noop.py)
    previous = guard(lambda: quick_previous(project, options), places)
    if previous is not None:
        _print_up_to_date(previous, verbose=verbose, as_json=as_json)
        return
    # the same build published elsewhere and kept: put in place, unplanned (pipeline/replay.py)
    replayed = guard(lambda: _replay_unplanned(project, options), places)
    if replayed is not None:
        _print_replayed(replayed, as_json=as_json)
        return
    from ortbundle.pipeline.incremental import prepare_build

    prepared = guard(lambda: prepare_build(project, options), places)
    if prepared.previous is not None and not options.release:  # a release checks dist/ first
        _print_up_to_date(prepared.previous, verbose=verbose, as_json=as_json)
        return
    if prepared.memo.on and not options.audit_only and options.compare is None:
        from ortbundle.pipeline.replay import replay_build

        replayed = guard(
            lambda: replay_build(prepared.cache, prepared.key, prepared.version_dir), places
        )
        if replayed is not None:
            prepared.remember(project, options)  # the next no-op need not plan
            _print_replayed(replayed, as_json=as_json)
            return
    from ortbundle._core.progress import Reporter
    from ortbundle._core.repairs import watching

    stream = sys.stderr if as_json else sys.stdout
    with (
        Reporter(stream=stream) as reporter,
        watching(lambda r: reporter.line(r.line(FETCHED_AGAIN))) as repairs,
    ):
        from ortbundle.pipeline.console import build_plan_line, print_details

        reporter.line(build_plan_line(project, prepared, options.channels))
        result = guard(lambda: _build_or_report(project, options, reporter, prepared), places)
        if result.up_to_date is not None:  # another build published the same meanwhile
            _print_up_to_date(result.up_to_date, verbose=verbose, as_json=as_json)
            return
        from ortbundle.pipeline.result import summary_document
        from ortbundle.pipeline.summary import package_time_lines, read_summary, summary_lines

        document = read_summary(result.version_dir) or summary_document(
            result, reporter.phases, release=options.release
        )
        if verbose:
            print_details(reporter, result)
            for line in package_time_lines(document):
                reporter.line(line)
        for line in result.warnings:  # the build's own: a Python caller has them too
            reporter.line(line)
        for line in summary_lines(document):
            reporter.line(line)
        if not all(a.passed for a in result.audits):
            reporter.line("LICENCE AUDIT FAILED: this build is not fit to ship (see above)")
        if repairs:  # said as found (above), and again where a CI operator reads the summary
            one = len(repairs) == 1
            reporter.line(
                f"cache: {plural(len(repairs), 'entry', 'entries')} failed "
                f"{'its hash and was' if one else 'their hash and were'} fetched again: "
                + ", ".join(r.path.name[:12] for r in repairs)
            )
    if as_json:
        from ortbundle.pipeline.summary import summary_json

        sys.stdout.write(summary_json(document))
    _published_but_unsaid(result.version_dir)


def _replay_unplanned(project: Project, options: BuildOptions) -> dict[str, object] | None:
    """A kept build's tree put in place, its key found from the quick record; else None."""
    from ortbundle.pipeline.noop import remember_quick
    from ortbundle.pipeline.replay import quick_key, replay_build

    found = quick_key(project, options)
    if found is None:
        return None
    from ortbundle._core.locations import default_cache_dir

    cache = options.cache_dir or default_cache_dir()
    replayed = replay_build(cache, found.key, found.version_dir)
    if replayed is not None:
        remember_quick(
            cache,
            project,
            options,
            product=found.product,
            version_dir=found.version_dir,
            key=found.key,
            inputs=found.inputs,
            facts=found.facts,
        )
    return replayed


def _print_replayed(document: dict[str, object], *, as_json: bool) -> None:
    """A replayed build: said so, then the kept build's warnings and summary, as this run's."""
    from ortbundle.pipeline.summary import summary_json, summary_lines

    warnings = document.pop("warnings", [])
    out = sys.stderr if as_json else sys.stdout
    print(
        "replayed: an identical build's tree (the same inputs, code and options), put in place "
        "from the cache; nothing was staged or packaged again",
        file=out,
    )
    for line in warnings if isinstance(warnings, list) else []:
        print(line, file=out)
    for line in summary_lines(document):
        print(line, file=out)
    if as_json:
        sys.stdout.write(summary_json(document))


def _published_but_unsaid(version_dir: Path) -> None:
    """After publishing, an output that could not be written (a full disk under stdout) says
    the build was published, and where its summary is: CI must not read a failed step as a
    build that published nothing. A closed pipe is left to the task (exit 141)."""
    from ortbundle._core.progress import OUTPUT_EXIT, output_failed_message, output_failure
    from ortbundle.pipeline.result import SUMMARY_NAME

    lost = output_failure()
    if lost is None or lost[1].errno == errno.EPIPE:
        return
    done = (
        f"the build completed and WAS PUBLISHED: {version_dir} (its summary: "
        f"{version_dir / SUMMARY_NAME})"
    )
    raise CommandFailed(output_failed_message(*lost, done), OUTPUT_EXIT)


def _print_up_to_date(summary: dict[str, object], *, verbose: bool, as_json: bool) -> None:
    """A no-op build: the earlier summary, read back from build-summary.json (json only: no
    rich, no pipeline); without it, the verdicts the build record kept."""
    from ortbundle._core.progress import terminal_width, wrap
    from ortbundle.pipeline.summary import read_summary, summary_json, summary_lines

    version_dir = Path(str(summary.get("version_dir", "")))
    document = read_summary(version_dir)
    if as_json and document is not None:
        # the last build's document, marked up to date: what it downloaded and repaired, and
        # how long it took, is not what this run did (nothing)
        artifacts = document["artifacts"]
        now = {**artifacts, "downloaded": 0, "cached": artifacts["total"], "repaired": []}
        this_run = {"up_to_date": True, "phases": [], "artifacts": now}
        sys.stdout.write(summary_json({**document, **this_run}))
        return
    out = sys.stderr if as_json else sys.stdout
    print("up to date: no input and no output changed; nothing was rebuilt", file=out)
    if document is not None:
        lines = summary_lines(document, short=not verbose)
        width = terminal_width(out.isatty())
        for line in wrap(lines, width) if width else lines:
            print(line, file=out)
        return
    audit = summary.get("audit")
    for line in audit if isinstance(audit, list) else []:
        print(line, file=out)
    print(f"staged: {version_dir}", file=out)


def run_audit(
    options: BuildOptions, *, json_path: Path | None, root: Path = ROOT, dist: Path | None = None
) -> None:
    """Stage aside, attribute and audit; publish nothing. The exit code is the gate."""
    from ortbundle._core.progress import Reporter
    from ortbundle.pipeline.build import AuditFailed, build
    from ortbundle.pipeline.console import audit_report_json, print_audit

    project = Project.at(root, dist)
    with Reporter() as reporter:
        failure: AuditFailed | None = None
        try:
            result = guard(
                lambda: build(project, options, reporter), write_places_of(project, options)
            )
            audits, product = result.audits, result.plan.product
            licensing = [t.licensing for t in result.targets]
        except CommandFailed as exc:
            if not isinstance(exc.__context__, AuditFailed):
                raise
            failure = exc.__context__
            audits, product, licensing = failure.audits, failure.product, failure.licensing
        print_audit(reporter.console, audits, licensing, reporter)
        version_dir = Project.at(root, dist).dist / product.name / product.version
        out = json_path or version_dir.with_name(f"{product.version}.audit.json")
        text = audit_report_json(product.name, product.version, audits, licensing)

        def write_report() -> None:
            out.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(out, text)

        guard(write_report, {out.parent: "the audit report"})
        reporter.line(f"audit report: {out}")
        if failure is not None:
            raise CommandFailed(headline(failure), failure.exit_code)


def run_fetch(options: BuildOptions, *, root: Path = ROOT) -> None:
    from ortbundle._core.progress import Reporter
    from ortbundle.pipeline.build import fetch

    project = Project.at(root)
    with Reporter() as reporter:
        _plan, artifacts = guard(
            lambda: fetch(project, options, reporter), write_places_of(project, options)
        )
        for sha256, artifact in sorted(artifacts.items(), key=lambda i: i[1].source.filename):
            source = artifact.source
            if sha256 == source.sha256:
                state = "downloaded" if artifact.downloaded else "cached"
                name = source.filename
            else:  # an archive inside the download (an AAR in an npm tarball)
                state = "extracted" if artifact.downloaded else "cached"
                name = f"{source.filename} → {source.archive_name}"
            reporter.line(f"{state:10} {sha256[:12]}  {name}")


def run_clean(*, root: Path = ROOT, dist: Path | None = None) -> None:
    target = Project.at(root, dist).dist
    if target.exists():
        shutil.rmtree(target)
    print(f"removed {target}", file=sys.stdout)
