"""invoke templates: which templates a project renders, where each comes from and what it
receives (`--list`); a built-in one copied into the project's templates/ to start from
(`--copy NAME`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ortbundle._core.errors import ConfigError
from ortbundle._core.overrides import (
    BUILTIN_DIR,
    SPECS,
    Overrides,
    find_overrides,
    template_directories,
)
from ortbundle.cli.common import ROOT, guard
from ortbundle.config.project import Project


def _directory(project: Project, product: str) -> tuple[str, str]:
    """The product's own template directory (templates/ unless its [packaging] names one) and
    the manifest that names it ("" when that is templates/ or there is no such product yet)."""
    from ortbundle.config.products import load_product

    manifest = project.manifests / f"{product}.toml"
    if not manifest.is_file():
        return project.templates.name, ""
    own = load_product(manifest).packaging.templates
    return own, (str(manifest) if own != project.templates.name else "")


def _overrides(project: Project, product: str) -> Overrides:
    own, named_by = _directory(project, product)
    return find_overrides(project.root, template_directories(own), named_by=named_by)


def template_lines(project: Project, product: str) -> list[str]:
    """One paragraph per replaceable template: where it comes from, what it becomes, the
    variables and filters it receives."""
    overrides = _overrides(project, product)
    lines = []
    for name, spec in SPECS.items():
        override = overrides.get(name)
        source = f"from {override.shown}" if override else "built-in"
        lines.append(f"{name}  ({source}; {spec.rendered_by} → {spec.output})")
        lines.append(f"  variables: {', '.join(spec.variables)}")
        if spec.filters:
            lines.append(f"  filters: {', '.join(spec.filters)} (and jinja's own)")
    return lines


def copy_template(project: Project, product: str, name: str) -> Path:
    """Copy the built-in `name` into the product's template directory; never over a file."""
    if name not in SPECS:
        from difflib import get_close_matches

        close = get_close_matches(name, list(SPECS), n=1, cutoff=0.6)
        raise ConfigError(
            f"{name} is not a template a project may replace",
            fix=(f"did you mean {close[0]}? " if close else "")
            + f"one of: {', '.join(SPECS)} (invoke templates --list)",
        )
    own, _ = _directory(project, product)
    dest = project.root / own / name
    if dest.exists():
        raise ConfigError(
            f"{own}/{name} exists already",
            file=str(dest),
            fix="edit it, or remove it to start again from the built-in one",
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(BUILTIN_DIR / name, dest)
    return dest


def run_templates(*, product: str, copy: str | None, root: Path = ROOT) -> None:
    """The task: list the templates, or copy one (then say where it went)."""
    project = Project.at(root)
    if copy:
        dest = guard(lambda: copy_template(project, product, copy))
        print(f"wrote {dest.relative_to(project.root)}: edit it; the next build uses it")
        return
    for line in guard(lambda: template_lines(project, product)):
        print(line)
