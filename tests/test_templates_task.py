"""invoke templates: each template, where it comes from and what it receives; --copy starts a
replacement from the built-in one, which the next build then uses."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ortbundle._core.overrides import BUILTIN_DIR, SPECS
from ortbundle.cli.common import CommandFailed
from ortbundle.cli.templates import run_templates
from ortbundle.config.plan import load_plan
from ortbundle.config.project import BuildOptions, Project
from tests.helpers.toml_edit import set_key

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name in ("recipes", "manifests", "licenses"):
        shutil.copytree(REPO / name, tmp_path / name)
    return tmp_path


def _listed(root: Path, capsys: pytest.CaptureFixture[str], product: str = "darkroom") -> str:
    run_templates(product=product, copy=None, root=root)
    return capsys.readouterr().out


def test_the_list_names_every_template_its_origin_and_variables(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = _listed(project, capsys)
    for name, spec in SPECS.items():
        assert f"{name}  (built-in; {spec.rendered_by} → {spec.output})" in listed
    assert "  variables: product, version, target, licensing\n" in listed
    assert "  filters: bash (and jinja's own)\n" in listed
    (project / "templates").mkdir()
    (project / "templates" / "NOTICE.j2").write_text("{{ product }}\n")
    assert "NOTICE.j2  (from templates/NOTICE.j2; the licence attribution" in _listed(
        project, capsys
    )


def test_copy_starts_a_replacement_the_plan_then_uses(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_templates(product="darkroom", copy="apk/AndroidManifest.xml.j2", root=project)
    copied = project / "templates" / "apk" / "AndroidManifest.xml.j2"
    assert copied.read_bytes() == (BUILTIN_DIR / "apk" / "AndroidManifest.xml.j2").read_bytes()
    assert "wrote templates/apk/AndroidManifest.xml.j2" in capsys.readouterr().out
    plan = load_plan(Project.at(project), BuildOptions(product="darkroom"), parse_models=False)
    assert [o.shown for o in plan.templates.items] == ["templates/apk/AndroidManifest.xml.j2"]
    with pytest.raises(CommandFailed) as caught:  # never over the project's own file
        run_templates(product="darkroom", copy="apk/AndroidManifest.xml.j2", root=project)
    assert caught.value.code == 2
    assert "exists already" in str(caught.value)


def test_copy_goes_into_the_product_directory_and_refuses_an_unknown_name(
    project: Path,
) -> None:
    set_key(project / "manifests" / "darkroom.toml", "packaging.templates", "templates/acme")
    (project / "templates" / "acme").mkdir(parents=True)
    run_templates(product="darkroom", copy="NOTICE.j2", root=project)
    assert (project / "templates" / "acme" / "NOTICE.j2").is_file()
    with pytest.raises(CommandFailed) as caught:
        run_templates(product="darkroom", copy="PKGBUILD", root=project)
    assert caught.value.code == 2
    assert "did you mean PKGBUILD.j2?" in str(caught.value)


def test_a_product_directory_outside_templates_is_refused_before_anything_is_written(
    project: Path,
) -> None:
    set_key(project / "manifests" / "darkroom.toml", "packaging.templates", "../outside")
    with pytest.raises(CommandFailed) as caught:
        run_templates(product="darkroom", copy="NOTICE.j2", root=project)
    assert caught.value.code == 2
    assert "'../outside' is not templates or a directory in it" in str(caught.value)
    assert not (project.parent / "outside").exists()
