"""The user-facing commands behind tasks.py: argument shaping, output, exit codes."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ortbundle._core.errors import IntegrityError, OrtbundleError
from ortbundle._core.fsio import atomic_write
from ortbundle._core.locations import ENV_KEY, default_key_path
from ortbundle.config.project import BuildOptions, Project

if TYPE_CHECKING:
    from ortbundle._core.progress import Reporter
    from ortbundle.licensing.audit import ChannelAudit
    from ortbundle.pipeline.incremental import PreparedBuild
    from ortbundle.pipeline.result import BuildResult
    from ortbundle.tools.scaffold import ScaffoldOptions

# The pipeline's modules (HTTP, archives, binaries, SBOM, licences, rich) are imported inside
# the commands that use them: a no-op `invoke build` must not pay for them.

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]


USAGE_EXIT = 2  # a command called the wrong way (a missing or contradictory option)


class CommandFailed(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _guard(action: Callable[[], T], places: Mapping[Path, str] | None = None) -> T:
    """Run a command's work: a typed failure, or an OS error on a path it writes (named from
    `places`, see ortbundle/_core/oserrors.py), becomes one message and its exit code."""
    try:
        return action()
    except OrtbundleError as exc:
        raise CommandFailed(_headline(exc), exc.exit_code) from None
    except OSError as exc:
        from ortbundle._core.oserrors import from_oserror, is_disk_error

        if not is_disk_error(exc):
            raise
        error = from_oserror(exc, places or {})
        raise CommandFailed(_headline(error), error.exit_code) from None


def _places(project: Project, options: BuildOptions) -> dict[Path, str]:
    from ortbundle._core.locations import default_cache_dir
    from ortbundle._core.oserrors import write_places

    environ = os.environ if options.environ is None else options.environ
    key_dir = default_key_path(options.product, environ).parent
    return write_places(options.cache_dir or default_cache_dir(), project.dist, key_dir)


def _headline(exc: OrtbundleError) -> str:
    kind = "error" if exc.kind == "error" else f"{exc.kind} error"
    return f"ortbundle: {kind}: {exc}"


def _build_or_report(
    project: Project,
    options: BuildOptions,
    reporter: Reporter,
    prepared: PreparedBuild | None = None,
) -> BuildResult:
    from ortbundle.licensing.audit import print_report
    from ortbundle.pipeline.build import AuditFailed, build

    try:
        return build(project, options, reporter, prepared)
    except AuditFailed as failed:
        print_report(reporter.console, failed.audits)
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
    places = _places(project, options)
    # nothing moved since the last build: said without planning (ortbundle/pipeline/noop.py)
    previous = _guard(lambda: quick_previous(project, options), places)
    if previous is not None:
        _print_up_to_date(previous, verbose=verbose, as_json=as_json)
        return
    from ortbundle.pipeline.incremental import prepare_build

    prepared = _guard(lambda: prepare_build(project, options), places)
    if prepared.previous is not None:
        _print_up_to_date(prepared.previous, verbose=verbose, as_json=as_json)
        return
    from ortbundle._core.progress import Reporter
    from ortbundle._core.repairs import watching

    stream = sys.stderr if as_json else sys.stdout
    with (
        Reporter(stream=stream) as reporter,
        watching(lambda r: reporter.line(r.line())) as repairs,
    ):
        reporter.line(_plan_line(prepared, options))
        result = _guard(lambda: _build_or_report(project, options, reporter, prepared), places)
        if result.up_to_date is not None:  # another build published the same meanwhile
            _print_up_to_date(result.up_to_date, verbose=verbose, as_json=as_json)
            return
        from ortbundle.pipeline.result import summary_document
        from ortbundle.pipeline.summary import read_summary, summary_lines

        document = read_summary(result.version_dir) or summary_document(
            result, reporter.phases, options
        )
        if verbose:
            _print_details(reporter, result)
        from ortbundle.stage.binaries.loads import warning_lines

        found = [
            (t.target, s.runtime, s.directory, f)
            for t in result.targets
            for s in t.runtimes
            for f in s.closure.load_findings
        ]
        for line in warning_lines(found):
            reporter.line(line)
        from ortbundle.pipeline.reachable import (
            warning_lines as never_chosen,  # a runtime no machine gets
        )

        # the verdicts are kept under the build's memo (a release's is off: judged again)
        for line in never_chosen([t.stage for t in result.targets], prepared.memo):
            reporter.line(line)
        for line in summary_lines(document):
            reporter.line(line)
        if not all(a.passed for a in result.audits):
            reporter.line("LICENCE AUDIT FAILED: this build is not fit to ship (see above)")
        if repairs:  # said as found (above), and again where a CI operator reads the summary
            reporter.line(
                f"cache: {len(repairs)} entries failed their hash and were fetched again: "
                + ", ".join(r.path.name[:12] for r in repairs)
            )
    if as_json:
        from ortbundle.pipeline.summary import summary_json

        sys.stdout.write(summary_json(document))


def _plan_line(prepared: PreparedBuild, options: BuildOptions) -> str:
    from ortbundle.fetch.cache import Cache
    from ortbundle.pipeline.summary import plan_line

    plan = prepared.plan
    cache = Cache(prepared.cache)
    wanted = {source.sha256 for _, source in plan.all_sources()}
    cached = sum(1 for sha256 in wanted if cache.blob_path(sha256).is_file())
    channels = [c for c in plan.product.channels if not options.channels or c in options.channels]
    return plan_line(
        plan.product.name,
        plan.product.version,
        plan.targets,
        plan.product.runtimes,
        channels,
        cached,
        len(wanted),
    )


def _print_details(reporter: Reporter, result: BuildResult) -> None:
    """--verbose: the tables an auditor or packager reads (sizes, libraries, hints, licences)."""
    from ortbundle.licensing.audit import coverage_lines, print_report
    from ortbundle.pipeline.result import externals_lines, size_table
    from ortbundle.stage.system import summary_lines

    reporter.console.print(size_table(result))
    details = externals_lines(result)
    runtimes = [(t.target, [(s.runtime, s) for s in t.runtimes]) for t in result.targets]
    details += summary_lines(result.plan.product.system, runtimes)
    for package in result.packages:  # what a packager must know (sizes, tools, next steps)
        details += [f"{package.channel}: {note}" for note in package.notes]
    for line in details:
        reporter.line(line)
    print_report(reporter.console, _distinct(result.audits))
    for line in coverage_lines([t.licensing for t in result.targets]):
        reporter.line(line)


def _distinct(audits: tuple[ChannelAudit, ...]) -> list[ChannelAudit]:
    """One table per verdict: channels that audit the same targets the same way share it."""
    from dataclasses import replace

    from ortbundle.pipeline.result import audit_groups

    by_channel = {a.channel: a for a in audits}
    return [
        replace(by_channel[g["channels"][0]], channel=", ".join(g["channels"]))
        for g in audit_groups(audits)
    ]


def _print_up_to_date(summary: dict[str, object], *, verbose: bool, as_json: bool) -> None:
    """A no-op build: the earlier summary, read back from build-summary.json (json only: no
    rich, no pipeline); without it, the verdicts the build record kept."""
    from ortbundle._core.progress import terminal_width, wrap
    from ortbundle.pipeline.summary import read_summary, summary_json, summary_lines

    version_dir = Path(str(summary.get("version_dir", "")))
    document = read_summary(version_dir)
    if as_json and document is not None:
        sys.stdout.write(summary_json({**document, "up_to_date": True, "phases": []}))
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
    from ortbundle.licensing.audit import coverage_lines, print_report, report_json
    from ortbundle.pipeline.build import AuditFailed, build

    project = Project.at(root, dist)
    with Reporter() as reporter:
        failure: AuditFailed | None = None
        try:
            result = _guard(lambda: build(project, options, reporter), _places(project, options))
            audits, product = result.audits, result.plan.product
            licensing = [t.licensing for t in result.targets]
        except CommandFailed as exc:
            if not isinstance(exc.__context__, AuditFailed):
                raise
            failure = exc.__context__
            audits, product, licensing = failure.audits, failure.product, failure.licensing
        print_report(reporter.console, audits)
        for line in coverage_lines(licensing):
            reporter.line(line)
        version_dir = Project.at(root, dist).dist / product.name / product.version
        out = json_path or version_dir.with_name(f"{product.version}.audit.json")
        text = report_json(product.name, product.version, audits, licensing)

        def write_report() -> None:
            out.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(out, text)

        _guard(write_report, {out.parent: "the audit report"})
        reporter.line(f"audit report: {out}")
        if failure is not None:
            raise CommandFailed(_headline(failure), failure.exit_code)


def run_fetch(options: BuildOptions, *, root: Path = ROOT) -> None:
    from ortbundle._core.progress import Reporter
    from ortbundle.pipeline.build import fetch

    project = Project.at(root)
    with Reporter() as reporter:
        _plan, artifacts = _guard(
            lambda: fetch(project, options, reporter), _places(project, options)
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


def run_verify(
    tree: Path | None,
    *,
    manifest: Path | None,
    target: str | None,
    public_key: Path | None,
    allow_unsigned: bool,
    product: str,
    root: Path = ROOT,
) -> None:
    """Re-hash a tree against the signed manifest; the exit code says whether it matched."""
    from ortbundle.config.plan import load_plan
    from ortbundle.evidence.verify import verify_tree

    if tree is None:
        plan = _guard(lambda: load_plan(Project.at(root), BuildOptions(product=product)))
        tree = Project.at(root).dist / plan.product.name / plan.product.version
    key_path = public_key
    if key_path is None:
        # The key is chosen by the caller (--product), never by the tree being checked: a
        # tampered manifest must not be able to name the key that "verifies" it.
        default = Project.at(root).keys / f"{product}.pub"
        key_path = default if default.is_file() else None
        claimed = _manifest_product(tree, manifest, target)
        if claimed is not None and claimed != product:
            # a usage error (exit 2), not a failed check: no file was hashed yet. Only a product
            # of this project is suggested: a tampered tree may name anything ("../../evil").
            known = claimed.isidentifier() or claimed.replace("-", "_").isidentifier()
            mine = known and (Project.at(root).manifests / f"{claimed}.toml").is_file()
            hint = f"pass --product {claimed}" if mine else "pass the right --product"
            raise CommandFailed(
                f"ortbundle: usage error: the manifest says product {claimed!r}, not "
                f"{product!r}; {hint} (its key verifies its trees), or --public-key explicitly",
                USAGE_EXIT,
            )
    report = _guard(
        lambda: verify_tree(
            tree,
            manifest=manifest,
            target=target,
            public_key=key_path,
            allow_unsigned=allow_unsigned,
        )
    )
    signer = f"signature OK (key {report.signed_by})" if report.signed_by else "UNSIGNED"
    print(f"{report.tree}: {report.product} {report.version}, {signer}")
    if report.provenance is not None:
        print(report.provenance.line())
    for line in report.lines():
        print(line)
    if not report.ok:
        raise CommandFailed(
            f"ortbundle: integrity error: {len(report.modified)} modified, "
            f"{len(report.missing)} missing, {len(report.unexpected)} unexpected "
            f"(of {report.checked + len(report.missing)} files in the manifest)",
            IntegrityError.exit_code,
        )
    print(f"{report.checked} files match the manifest")


def _manifest_product(tree: Path, manifest: Path | None, target: str | None) -> str | None:
    from ortbundle.evidence.verify import locate_manifest

    try:
        path, _ = locate_manifest(tree, manifest, target)
        return str(json.loads(path.read_text("utf-8"))["product"]["name"])
    except (OrtbundleError, OSError, ValueError, KeyError, TypeError):
        return None


def run_keygen(
    product: str, *, secret: Path | None, public: Path | None, force: bool, root: Path = ROOT
) -> None:
    """A new Ed25519 key pair: the secret one outside the repository, the public one in keys/."""
    from ortbundle.evidence.signing import generate_keypair, write_public_key, write_secret_key

    secret_path = secret or default_key_path(product, os.environ)
    public_path = public or Project.at(root).keys / f"{product}.pub"
    key, pub = generate_keypair()
    places = {secret_path.parent: "the secret signing key", public_path.parent: "the public key"}

    def write() -> None:
        secret_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        public_path.parent.mkdir(parents=True, exist_ok=True)
        write_secret_key(secret_path, key, force=force)
        write_public_key(public_path, pub)

    _guard(write, places)
    print(f"key id {pub.key_id_hex}")
    print(f"secret key: {secret_path} (mode 0600; keep it out of the repository)")
    print(f"public key: {public_path} (commit it: packagers verify with it)")
    print(f"CI: store the secret key file's content in a secret named {ENV_KEY}")
    print(f"anyone: minisign -V -p {public_path} -m manifest.json")


def run_pin(
    component: str | None,
    *,
    version: str | None,
    sources: list[str],
    index_url: str | None,
    no_build: bool,
    force: bool,
    check: bool,
    json_path: Path | None,
    root: Path = ROOT,
) -> None:
    """Move a recipe's pins (or check them all) and print the bump report."""
    from ortbundle._core.progress import Reporter
    from ortbundle.tools.pin import PinOptions, check_pins, pin

    project = Project.at(root)
    options = PinOptions(
        version=version,
        sources=tuple(sources),
        build=not no_build,
        force=force,
        index_url=index_url,
    )
    with Reporter() as reporter:
        if check:
            report = _guard(lambda: check_pins(project, (component,) if component else (), options))
            for line in report.lines():
                reporter.line(line)
            if json_path:
                _guard(lambda: atomic_write(json_path, report.to_json()))
            if not report.ok:
                attention = any(
                    s.state not in ("current", "held", "unreachable") for s in report.statuses
                )
                headline = (
                    "ortbundle: some pins need attention"
                    if attention
                    else "ortbundle: some pins could not be checked (registry unreachable)"
                )
                raise CommandFailed(headline, report.exit_code)
            return
        if not component:
            raise CommandFailed(
                "ortbundle: usage error: name the component to pin (-c COMPONENT), or pass --check",
                USAGE_EXIT,
            )
        result = _guard(lambda: pin(project, component, options, reporter))
        for line in result.lines():
            reporter.line(line)
        if json_path:
            _guard(lambda: atomic_write(json_path, result.to_json()))
        if result.refused:
            raise CommandFailed(
                f"ortbundle: the new pin does not build; recipes/{component}.toml is unchanged "
                "(--force writes it anyway)",
                result.exit_code,
            )


def run_release(
    options: BuildOptions, sources: list[Path], *, root: Path = ROOT, dist: Path | None = None
) -> None:
    """Merge per-target runner trees into one checked, signed version directory."""
    from ortbundle._core.progress import Reporter
    from ortbundle.licensing.audit import print_report
    from ortbundle.pipeline.build import AuditFailed
    from ortbundle.pipeline.release import release

    if not sources:
        raise CommandFailed(
            "ortbundle: usage error: pass each runner's dist/ with --from", USAGE_EXIT
        )
    project = Project.at(root, dist)
    with Reporter() as reporter:
        try:
            result = _guard(lambda: release(project, sources, options), _places(project, options))
        except CommandFailed as exc:
            if isinstance(exc.__context__, AuditFailed):
                print_report(reporter.console, exc.__context__.audits)
            raise
        for runner in result.runners:
            reporter.line(f"merged {', '.join(runner.targets)} from {runner.path} (hashes checked)")
        print_report(reporter.console, result.audits)
        signer = f"signed with key {result.signed_by}" if result.signed_by else "UNSIGNED"
        reporter.line(f"released: {result.version_dir} ({signer})")


def run_cache_transfer(direction: str, where: str | Path | None) -> None:
    """Export the download cache to a plain directory, or import (re-hashing) from one."""
    from ortbundle.fetch.cache import Cache, default_cache_dir, export_cache, import_cache

    if not where:
        raise CommandFailed(f"ortbundle: usage error: pass --path DIR to {direction}", USAGE_EXIT)
    path = Path(where)
    cache = Cache(default_cache_dir())
    if not path.is_dir() and direction == "import":
        raise CommandFailed(f"ortbundle: configuration error: {path} is not a directory", 2)
    if direction == "export":
        try:
            report = export_cache(cache, path)
        except OSError as exc:
            raise CommandFailed(f"ortbundle: cannot export the cache to {path}: {exc}", 1) from None
        print(f"exported {len(report.copied)} new, {len(report.already)} present: {path}")
        return
    try:
        report = import_cache(cache, path)
    except OSError as exc:
        raise CommandFailed(f"ortbundle: cannot import the cache from {path}: {exc}", 1) from None
    print(
        f"imported {len(report.copied)}, {len(report.already)} already cached, "
        f"{len(report.rejected)} rejected (bytes do not match their hash)"
    )
    for sha256 in report.rejected:
        print(f"rejected {sha256}")
    if report.rejected:
        raise CommandFailed(
            f"ortbundle: integrity error: {len(report.rejected)} entries of {path} were corrupt "
            "and were not imported",
            IntegrityError.exit_code,
        )


def run_cache_verify() -> None:
    """Re-hash every cached download; exit 4 if any was corrupt (it is removed either way)."""
    from ortbundle._core.locations import default_cache_dir
    from ortbundle._core.oserrors import write_places
    from ortbundle.fetch.cache_verify import verify_cache

    root = default_cache_dir()
    report = _guard(lambda: verify_cache(root), write_places(root))
    for repair in report.repaired:
        print(repair.line())
    for sha256 in report.unrecorded:
        print(f"cache: {sha256} had no record of when it was stored; removed, fetched again")
    bad = len(report.repaired) + len(report.unrecorded)
    print(f"{root}: {len(report.good) + bad} entries re-hashed, {len(report.good)} good, {bad} bad")
    if report.repaired:
        raise CommandFailed(
            f"ortbundle: integrity error: {len(report.repaired)} cache entries held bytes that "
            "do not match their hash (a failing disk, or a tampered cache); they were removed "
            "and the next build downloads them again",
            IntegrityError.exit_code,
        )


def run_ci_workflow(product: str, out: Path | None, *, root: Path = ROOT) -> None:
    from ortbundle.config.plan import load_plan
    from ortbundle.tools.ci_workflow import workflow_yaml

    plan = _guard(lambda: load_plan(Project.at(root), BuildOptions(product=product)))
    target = out or root / "ci" / f"{product}-github-actions.yml"
    target.parent.mkdir(parents=True, exist_ok=True)
    _guard(lambda: atomic_write(target, workflow_yaml(plan.product)))
    print(f"wrote {target} ({len(plan.product.targets)} target jobs, a release and a publish job)")


def run_new_recipe(options: ScaffoldOptions, *, root: Path | None = None) -> None:
    """The task: print what was found and written; exit codes as ortbundle/_core/errors.py, and
    EXIT_NEEDS_CHOICE (8, as an unresolved library in a build) when the recipe is written but a
    choice is left to the user."""
    from ortbundle._core.progress import Reporter
    from ortbundle.cli import ROOT, CommandFailed, _guard
    from ortbundle.tools.scaffold import EXIT_NEEDS_CHOICE, new_recipe

    project = Project.at(root or ROOT)
    with Reporter() as reporter:
        result = _guard(lambda: new_recipe(project, options, reporter))
        for line in result.lines():
            reporter.line(line)
    if result.choices:
        raise CommandFailed(
            f"ortbundle: {result.recipe.name} written; {len(result.choices)} choice(s) left to "
            "you (above) before it builds",
            EXIT_NEEDS_CHOICE,
        )


def run_smoke(
    product: str, targets: Sequence[str], *, root: Path, dist: Path | None, scratch: Path | None
) -> None:
    """The `invoke smoke` task: the product's built version directory, every runtime; raises
    CommandFailed (exit 13) when any line FAILs."""
    from ortbundle._core.errors import SmokeError
    from ortbundle.config.plan import load_plan
    from ortbundle.tools.smoke.run import smoke

    try:
        project = Project.at(root, dist)
        plan = load_plan(project, BuildOptions(product=product), parse_models=False)
        version_dir = project.dist / plan.product.name / plan.product.version
        if not version_dir.is_dir():
            raise SmokeError(
                f"{plan.product.name} {plan.product.version} is not built",
                file=str(version_dir),
                fix=f"run `invoke build --product {product}` first",
            )
        report = smoke(
            version_dir,
            root=root,
            package_name=plan.product.packaging.package_name,
            targets=targets,
            scratch=scratch,
        )
    except OrtbundleError as exc:
        raise CommandFailed(_headline(exc), exc.exit_code) from None
    if report.failed:
        raise CommandFailed(
            f"ortbundle: smoke error: {len(report.failed)} FAIL", SmokeError.exit_code
        )
