"""The templates a project may replace, and the replacements it brings.

A file in the project's top-level `templates/` (or in the directory a product names with
`[packaging] templates`, searched first) named like a built-in template (ortbundle/templates/)
replaces it for that project. Each replaceable template is declared here with what renders it,
the variables it receives and the filters it may use, so that a replacement is checked when the
build is planned, before any work: a syntax error, a variable the renderer does not provide or
an unknown filter is a ConfigError naming the file, the line and what there is to use.

Plain data and a static check: jinja2 is imported only when a replacement exists.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from ortbundle._core.errors import ConfigError
from ortbundle._core.fsio import inside_project

if TYPE_CHECKING:
    import jinja2

BUILTIN_DIR = Path(__file__).resolve().parents[1] / "templates"
PROJECT_DIR = "templates"  # the project's own, beside recipes/ and manifests/


@dataclass(frozen=True)
class TemplateSpec:
    """One replaceable template: who renders it, into what, with which variables and filters."""

    name: str  # its relative name: "PKGBUILD.j2", "apk/build.gradle.kts.j2"
    rendered_by: str  # "the arch channel"
    output: str  # what it becomes: "packaging/arch/PKGBUILD"
    variables: tuple[str, ...]
    filters: tuple[str, ...] = ()  # the format's own escaping filters, beside jinja's


_NSIS_VARIABLES = (
    *("display_name", "product", "version", "publisher", "description", "url", "copyright"),
    *("package_name", "outfile", "vi_version", "uninstall_key", "uninstaller", "addon"),
    *("estimated_kib", "directories", "uninstall_files", "uninstall_dirs", "required"),
    *("optional", "log_name", "machine_test", "machine_message", "target"),
    *("required_intro", "required_outro"),
    *("optional_intro", "min_windows", "per_machine_text", "upgrade_detail", "upgrade_failed"),
    "compressor",  # {"command": SetCompressor's argument, "dictionary_mib": None or MiB}
    *("in_use_checks", "in_use_message"),
)
_APK_VARIABLES = (
    *("namespace", "compile_sdk", "min_sdk", "use_legacy_packaging", "no_compress", "fastrpc"),
    *("native_libraries", "schema", "override_property"),
)
_APK_FILTERS = ("kotlin_string", "java_string")

SPECS: dict[str, TemplateSpec] = {
    spec.name: spec
    for spec in (
        TemplateSpec(
            "PKGBUILD.j2",
            "the arch channel",
            "packaging/arch/PKGBUILD",
            (
                *("pkgname", "lib_name", "pkgver", "pkgrel", "pkgdesc", "url", "arch"),
                *("license", "depends", "optdepends", "options", "source", "sha256sums"),
                "validpgpkeys",
                *("prefix", "lib_dirs", "lib_entries", "share_dirs", "share_entries", "udev_rules"),
            ),
            ("bash",),
        ),
        TemplateSpec(
            "installer.nsi.j2",
            "the nsis channel",
            "packaging/nsis/installer.nsi",
            _NSIS_VARIABLES,
            ("nsis", "nsis_verbatim", "instdir"),
        ),
        TemplateSpec(
            "NOTICE.j2",
            "the licence attribution",
            "<target>/NOTICE",
            ("product", "version", "target", "licensing"),
        ),
        TemplateSpec(
            "debian-copyright.j2",
            "the deb channel",
            "/usr/share/doc/<package>/copyright in the .deb",
            ("upstream_name", "source", "comment", "files", "licenses"),
            ("dep5", "dep5_body"),
        ),
        TemplateSpec(
            "apk/build.gradle.kts.j2",
            "the apk channel",
            "packaging/apk/<module>/build.gradle.kts",
            _APK_VARIABLES,
            _APK_FILTERS,
        ),
        TemplateSpec(
            "apk/AndroidManifest.xml.j2",
            "the apk channel",
            "packaging/apk/<module>/src/main/AndroidManifest.xml",
            _APK_VARIABLES,
            _APK_FILTERS,
        ),
        TemplateSpec(
            "apk/RuntimeLoader.java.j2",
            "the apk channel",
            "packaging/apk/<module>/src/main/java/<namespace>/RuntimeLoader.java",
            _APK_VARIABLES,
            _APK_FILTERS,
        ),
    )
}
# where a misnamed replacement is looked for: the directories the built-in ones live in
_SPEC_DIRS = frozenset(str(PurePosixPath(name).parent) for name in SPECS)


@dataclass(frozen=True)
class Override:
    """One replacement the project brings."""

    name: str  # the built-in template it replaces
    path: Path
    shown: str  # as the user names it: templates/PKGBUILD.j2
    sha256: str
    text: str = field(default="", repr=False)  # the bytes hashed, as rendered (UTF-8)


@dataclass(frozen=True)
class Overrides:
    """The replacements one build uses (empty: the built-in templates only)."""

    items: tuple[Override, ...] = ()
    # every file of the directories searched, with its SHA-256: an install script beside a
    # PKGBUILD.j2 is read by the build too
    files: tuple[tuple[str, str], ...] = ()

    def get(self, name: str) -> Override | None:
        return next((o for o in self.items if o.name == name), None)

    def key_lines(self) -> list[str]:
        """For the whole-build key: which file replaces which template, and every file's bytes."""
        lines = [f"template {o.name} {o.shown}" for o in self.items]
        return lines + [f"template file {shown} {sha256}" for shown, sha256 in self.files]


NO_OVERRIDES = Overrides()


def template_directories(packaging_templates: str) -> tuple[str, ...]:
    """Where a product's replacements are looked for, first wins: its own directory (when it
    names one), then the project's templates/."""
    own = (packaging_templates,) if packaging_templates else ()
    return (*own, PROJECT_DIR) if packaging_templates != PROJECT_DIR else (PROJECT_DIR,)


def find_overrides(root: Path, directories: Sequence[str], *, named_by: str = "") -> Overrides:
    """The replacements under `root`/`directories` (relative, first wins), each checked.

    A product's own directory (the first when `named_by`, the manifest naming it) must exist;
    the project's templates/ may be absent. Only where the built-in templates live is read
    (the directory itself and apk/): a `.j2` file there that replaces none of them is an error
    (a misspelt name would otherwise be silently ignored), other files there (an install script
    beside PKGBUILD.j2) are part of the key; another directory (another product's) is not
    this build's.
    """
    found: dict[str, Override] = {}
    files: dict[str, str] = {}
    for index, directory in enumerate(directories):
        top = root / directory
        if top.exists():
            inside_project(top, root)
        if not top.is_dir():
            if index == 0 and named_by:
                raise ConfigError(
                    f"[packaging] templates names {directory}/, which is not a directory of "
                    "the project",
                    file=named_by,
                    fix=f"create {directory}/ (invoke templates --copy NAME starts one), or "
                    "remove the key",
                )
            continue
        places = [top / sub for sub in sorted(_SPEC_DIRS) if (top / sub).is_dir()]
        for path in sorted(p for place in places for p in place.iterdir() if p.is_file()):
            name = path.relative_to(top).as_posix()
            shown = f"{directory}/{name}"
            inside_project(path, root)
            data = path.read_bytes()
            files[shown] = hashlib.sha256(data).hexdigest()
            if name in SPECS:
                if name not in found:  # a directory searched earlier has its own
                    found[name] = Override(name, path, shown, files[shown], _text(data, shown))
            elif name.endswith(".j2"):
                raise _unknown_template(name, shown)
    overrides = Overrides(tuple(found[n] for n in sorted(found)), tuple(sorted(files.items())))
    for override in overrides.items:
        check_override(override)
    return overrides


def _text(data: bytes, shown: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{shown} is not UTF-8 text ({exc.reason} at byte {exc.start})",
            file=shown,
            fix="save it as UTF-8",
        ) from None


def _unknown_template(name: str, shown: str) -> ConfigError:
    from difflib import get_close_matches  # only a mistake pays for it

    close = get_close_matches(name, list(SPECS), n=1, cutoff=0.6)
    guess = f"did you mean {close[0]}? " if close else ""
    return ConfigError(
        f"{shown} replaces no built-in template",
        file=shown,
        fix=f"{guess}the templates a project may replace: {', '.join(SPECS)} "
        "(invoke templates --list)",
    )


def environment() -> jinja2.Environment:
    """The settings every rendering uses (templating.py builds its environment from these)."""
    import jinja2

    return jinja2.Environment(
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # noqa: S701 - not HTML; every format escapes with its own filter
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def check_override(override: Override) -> None:
    """The replacement parses, and uses only the variables and filters its renderer provides
    (jinja's own globals and filters included); includes are refused (the build key covers
    the file itself, not what it would pull in)."""
    import jinja2
    from jinja2 import meta, nodes

    spec = SPECS[override.name]
    env = environment()
    try:
        tree = env.parse(override.text, override.name, str(override.path))
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(
            f"{override.shown} line {exc.lineno}: {exc.message}",
            file=f"{override.shown}:{exc.lineno}",
            fix="fix the Jinja syntax (invoke templates --copy starts from the built-in one)",
        ) from None
    for included in tree.find_all((nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)):
        raise ConfigError(
            f"{override.shown} line {included.lineno} includes another template",
            file=f"{override.shown}:{included.lineno}",
            fix="write the replacement as one file",
        )
    filters = set(spec.filters) | set(env.filters)
    for node in tree.find_all(nodes.Filter):
        if node.name not in filters:
            raise ConfigError(
                f"{override.shown} line {node.lineno} uses the filter {node.name!r}, which "
                f"{spec.rendered_by} does not provide",
                file=f"{override.shown}:{node.lineno}",
                fix=f"use one of its filters: {', '.join(spec.filters) or '(none)'}, or jinja's",
            )
    for test in tree.find_all(nodes.Test):
        if test.name not in env.tests:
            raise ConfigError(
                f"{override.shown} line {test.lineno}: No test named {test.name!r}",
                file=f"{override.shown}:{test.lineno}",
                fix="use jinja's own tests (is defined, is none, …)",
            )
    env.filters.update(dict.fromkeys(spec.filters, str))  # known by name to the analysis
    try:
        undeclared = meta.find_undeclared_variables(tree) - set(spec.variables) - set(env.globals)
    except jinja2.TemplateSyntaxError as exc:  # what only compiling finds
        raise ConfigError(
            f"{override.shown} line {exc.lineno}: {exc.message}",
            file=f"{override.shown}:{exc.lineno}",
            fix="fix the Jinja syntax (invoke templates --copy starts from the built-in one)",
        ) from None
    if undeclared:
        line, name = min((_first_use(tree, n), n) for n in undeclared)
        raise undefined_variable(override, f"the variable {name!r}", line)


def _first_use(tree: jinja2.nodes.Template, name: str) -> int:
    from jinja2 import nodes

    lines = [n.lineno for n in tree.find_all(nodes.Name) if n.name == name and n.ctx == "load"]
    return min(lines, default=1)


def undefined_variable(override: Override, what: str, line: int | None) -> ConfigError:
    """The error for a replacement using a variable (`what`: "the variable 'x'") or an
    attribute its renderer does not provide."""
    spec = SPECS[override.name]
    where = f"{override.shown}:{line}" if line else override.shown
    return ConfigError(
        f"{where} uses {what}, which {spec.rendered_by} does not provide to {spec.name}",
        file=where,
        fix=f"use the variables it receives: {', '.join(spec.variables)}",
    )
