"""A project's templates/ replaces built-in templates: found by name, checked against what each
renderer provides (exit 2 naming file, line and the variables there are), part of the build key,
and rendered by the channels in place of the built-in ones."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import ortbundle.channels.apk
import ortbundle.channels.arch
import ortbundle.channels.deb
import ortbundle.channels.nsis
import ortbundle.licensing.attribution
from ortbundle._core.errors import ConfigError, LicenseError
from ortbundle._core.memo import Memo
from ortbundle._core.overrides import (
    BUILTIN_DIR,
    NO_OVERRIDES,
    SPECS,
    Overrides,
    find_overrides,
    template_directories,
)
from ortbundle._core.templating import render, rendering_key
from ortbundle.channels import PackageInput
from ortbundle.channels.arch import ArchChannel
from ortbundle.channels.nsis import NsisChannel
from ortbundle.config.plan import load_plan
from ortbundle.config.project import BuildOptions, Project
from ortbundle.licensing.attribution import ComponentUse, TargetLicensing, notice_text
from ortbundle.pipeline.noop import input_stats
from ortbundle.stage.staging import StagedFile, StagedText
from tests.helpers.packages import make_package_input
from tests.helpers.toml_edit import set_key

WELCOME = '"Welcome! This installs the runtimes for " ~ display_name ~ ". "'


def _project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    return root


def _builtin(name: str) -> str:
    return (BUILTIN_DIR / name).read_text("utf-8")


def _nsis_override() -> str:
    """The built-in installer script with a welcome line on the directory page."""
    text = _builtin("installer.nsi.j2")
    old = "DirText {{ per_machine_text | nsis }}"
    assert old in text
    return text.replace(old, f"DirText {{{{ ({WELCOME} ~ per_machine_text) | nsis }}}}")


def _no_makensis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The script alone: compiling it is the build test's (test_template_builds.py)."""
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))


# --- finding and checking -------------------------------------------------------------------


def test_a_file_named_like_a_builtin_replaces_it_and_the_product_directory_wins(
    tmp_path: Path,
) -> None:
    root = _project(
        tmp_path,
        {
            "templates/NOTICE.j2": "{{ product }} notice\n",
            "templates/PKGBUILD.j2": "# shared {{ pkgname }}\n",
            "templates/acme/PKGBUILD.j2": "# acme {{ pkgname }}\n",
            "templates/acme/acme.install": "post_install() { :; }\n",
        },
    )
    shared = find_overrides(root, template_directories("templates"))
    assert [(o.name, o.shown) for o in shared.items] == [
        ("NOTICE.j2", "templates/NOTICE.j2"),
        ("PKGBUILD.j2", "templates/PKGBUILD.j2"),
    ]
    acme = find_overrides(root, template_directories("templates/acme"), named_by="acme.toml")
    assert acme.get("PKGBUILD.j2") is not None
    assert acme.get("PKGBUILD.j2").shown == "templates/acme/PKGBUILD.j2"  # type: ignore[union-attr]
    assert acme.get("NOTICE.j2").shown == "templates/NOTICE.j2"  # type: ignore[union-attr]
    # every file the build reads is keyed, the install script beside a template too
    assert any("templates/acme/acme.install" in line for line in acme.key_lines())
    assert find_overrides(tmp_path / "none", ("templates",)) == NO_OVERRIDES


def test_a_misspelt_template_and_a_missing_product_directory_are_config_errors(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path, {"templates/installer.nsis.j2": "x\n"})
    with pytest.raises(ConfigError) as caught:
        find_overrides(root, ("templates",))
    assert caught.value.exit_code == 2
    assert "templates/installer.nsis.j2 replaces no built-in template" in str(caught.value)
    assert "did you mean installer.nsi.j2?" in str(caught.value)
    with pytest.raises(ConfigError, match=r"templates/acme/, which is not a directory"):
        find_overrides(tmp_path / "empty", template_directories("templates/acme"), named_by="m")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "pkgname={{ pkgname | bash }}\n\ninstall={{ install_script }}\n",
            "templates/PKGBUILD.j2:3 uses the variable 'install_script', which the arch channel "
            "does not provide to PKGBUILD.j2",
        ),
        (
            "{% for e in lib_entries %}{{ e.dest }}{% endfor %}\n{{ pkgname | nsis }}\n",
            "templates/PKGBUILD.j2 line 2 uses the filter 'nsis'",
        ),
        ("{% if pkgname %}\n", "templates/PKGBUILD.j2 line 1: Unexpected end of template"),
        ('{% include "NOTICE.j2" %}\n', "templates/PKGBUILD.j2 line 1 includes another"),
        ("{{ 1 }}\n{% if pkgname is shell_safe %}x{% endif %}\n", "line 2: No test named"),
    ],
)
def test_an_override_is_checked_against_what_its_renderer_provides(
    tmp_path: Path, text: str, said: str
) -> None:
    root = _project(tmp_path, {"templates/PKGBUILD.j2": text})
    with pytest.raises(ConfigError) as caught:
        find_overrides(root, ("templates",))
    assert said in str(caught.value)
    assert caught.value.exit_code == 2


def test_the_undefined_variable_error_lists_the_variables_there_are(tmp_path: Path) -> None:
    root = _project(tmp_path, {"templates/NOTICE.j2": "{{ product }}\n{{ licence }}\n"})
    with pytest.raises(ConfigError) as caught:
        find_overrides(root, ("templates",))
    error = caught.value
    assert error.file == "templates/NOTICE.j2:2"
    assert "'licence'" in error.message
    assert error.fix == "use the variables it receives: product, version, target, licensing"
    # loop variables and jinja's own globals are not the renderer's to provide
    fine = "{% for c in licensing.components %}{{ c.name }}{% endfor %}{{ range(2) | list }}\n"
    (root / "templates/NOTICE.j2").write_text(fine)
    assert find_overrides(root, ("templates",)).get("NOTICE.j2") is not None


def test_every_renderer_passes_exactly_the_variables_it_declares(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `invoke templates --list` shows is what each template receives."""
    seen: dict[str, set[str]] = {}

    def spy(name: str, context: dict[str, Any], *args: Any, **kwargs: Any) -> str:
        seen[name] = set(context)
        return render(name, context, *args, **kwargs)

    modules = (ortbundle.channels.arch, ortbundle.channels.nsis, ortbundle.channels.deb)
    for module in (*modules, ortbundle.channels.apk, ortbundle.licensing.attribution):
        monkeypatch.setattr(module, "render", spy)
    _no_makensis(tmp_path, monkeypatch)
    linux = make_package_input(tmp_path / "linux", "linux-x86_64")
    ArchChannel().generate(linux, tmp_path / "arch")
    ortbundle.channels.deb.copyright_text(linux, "demo", "/usr/share/doc/demo")
    NsisChannel().generate(
        make_package_input(tmp_path / "windows", "windows-x86_64"), tmp_path / "nsis"
    )
    ortbundle.channels.apk._generated(make_package_input(tmp_path / "android", "android-arm64-v8a"))
    from ortbundle.licensing.attribution import TargetLicensing

    licensing = TargetLicensing("linux-x86_64", ())
    ortbundle.licensing.attribution.notice_text("demo", "1", licensing, memo=Memo.off())
    assert set(seen) == set(SPECS)
    for name, spec in SPECS.items():
        assert seen[name] == set(spec.variables), name


def test_a_renderer_passing_an_undeclared_variable_is_caught() -> None:
    with pytest.raises(AssertionError, match="does not declare"):
        render("NOTICE.j2", {"product": "x", "surprise": 1})


# --- rendering ----------------------------------------------------------------------------


def test_the_channels_render_the_replacement_and_its_bytes_key_the_rendering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_makensis(tmp_path, monkeypatch)
    root = _project(tmp_path / "p", {"templates/installer.nsi.j2": _nsis_override()})
    overrides = find_overrides(root, ("templates",))
    memo = Memo.for_build(tmp_path / "cache", release=False)
    package = make_package_input(tmp_path / "in", "windows-x86_64", memo=memo)
    NsisChannel().generate(package, tmp_path / "plain")
    assert "Welcome!" not in (tmp_path / "plain/installer.nsi").read_text("utf-8-sig")
    mine = make_package_input(tmp_path / "in2", "windows-x86_64", memo=memo, templates=overrides)
    NsisChannel().generate(mine, tmp_path / "mine")
    script = (tmp_path / "mine/installer.nsi").read_text("utf-8-sig")
    assert 'DirText "Welcome! This installs the runtimes for demo 1.0.0. demo 1.0.0 is' in script
    # the same context, another override: another key, never the kept rendering
    context = {"product": "demo", "version": "1", "target": "t", "licensing": None}
    assert rendering_key("NOTICE.j2", context, {}, "a" * 64) != rendering_key(
        "NOTICE.j2", context, {}, "b" * 64
    )


def test_an_attribute_the_renderer_lacks_is_a_config_error_naming_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_makensis(tmp_path, monkeypatch)
    text = _nsis_override().replace("Unicode true", "Unicode true\n; {{ addon.nme if 1 }}", 1)
    root = _project(tmp_path / "p", {"templates/installer.nsi.j2": text})
    overrides = find_overrides(root, ("templates",))  # a variable it has: passes the check
    package = make_package_input(tmp_path / "in", "windows-x86_64", templates=overrides)
    line = text.splitlines().index("; {{ addon.nme if 1 }}") + 1
    with pytest.raises(ConfigError) as caught:
        NsisChannel().generate(package, tmp_path / "out")
    assert caught.value.file == f"templates/installer.nsi.j2:{line}"
    assert "does not provide to installer.nsi.j2" in str(caught.value)


def _arch_package(tmp_path: Path, files: dict[str, str]) -> PackageInput:
    root = _project(tmp_path / "p", files)
    overrides = find_overrides(root, ("templates",))
    return make_package_input(tmp_path / "in", "linux-x86_64", templates=overrides)


def test_a_pkgbuild_install_script_is_shipped_beside_it_and_named_in_srcinfo(
    tmp_path: Path,
) -> None:
    pkgbuild = _builtin("PKGBUILD.j2").replace(
        "options=(", "install={{ (pkgname ~ '.install') | bash }}\noptions=(", 1
    )
    package = _arch_package(
        tmp_path,
        {
            "templates/PKGBUILD.j2": pkgbuild,
            "templates/demo-onnxruntime.install": "post_install() {\n  echo hi\n}\n",
        },
    )
    output = ArchChannel().generate(package, tmp_path / "out")
    assert tmp_path / "out/demo-onnxruntime.install" in output.files
    assert "post_install" in (tmp_path / "out/demo-onnxruntime.install").read_text()
    srcinfo = (tmp_path / "out/.SRCINFO").read_text()
    assert "\tinstall = demo-onnxruntime.install\n" in srcinfo
    (tmp_path / "p/templates/demo-onnxruntime.install").unlink()
    with pytest.raises(ConfigError, match="no demo-onnxruntime.install beside it"):
        ArchChannel().generate(package, tmp_path / "out2")


# --- the plan and the build key -------------------------------------------------------------


def _copy_repo_project(root: Path) -> Project:
    repo = Path(__file__).resolve().parents[1]
    for name in ("recipes", "manifests", "licenses"):
        shutil.copytree(repo / name, root / name)
    return Project.at(root)


def test_the_plan_carries_the_overrides_and_a_product_names_its_own_directory(
    tmp_path: Path,
) -> None:
    project = _copy_repo_project(tmp_path)
    options = BuildOptions(product="darkroom")
    assert load_plan(project, options, parse_models=False).templates == Overrides()
    _project(tmp_path, {"templates/acme/NOTICE.j2": "{{ product }}\n"})
    # templates/acme/ is another product's: the default directory leaves it alone (its edits
    # are not this product's build key)
    assert load_plan(project, options, parse_models=False).templates == Overrides()
    set_key(project.manifests / "darkroom.toml", "packaging.templates", "templates/acme")
    plan = load_plan(project, options, parse_models=False)
    assert [o.shown for o in plan.templates.items] == ["templates/acme/NOTICE.j2"]
    set_key(project.manifests / "darkroom.toml", "packaging.templates", "../elsewhere")
    with pytest.raises(ConfigError) as caught:
        load_plan(project, options, parse_models=False)
    assert "templates" in str(caught.value)


def test_the_quick_record_sees_templates(tmp_path: Path) -> None:
    project = Project.at(_project(tmp_path, {"templates/NOTICE.j2": "{{ product }}\n"}))
    assert f"{tmp_path}/templates/NOTICE.j2" in input_stats(project)


def test_an_override_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "NOTICE.j2").write_bytes(b"{{ product }} \xff\n")
    with pytest.raises(ConfigError, match=r"templates/NOTICE.j2 is not UTF-8 text"):
        find_overrides(tmp_path, ("templates",))


def test_a_value_the_format_refuses_is_a_config_error_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The channel checks what it writes into its own template; text a replacement composes
    can still exceed what NSIS holds: the same configuration error, at the line."""
    _no_makensis(tmp_path, monkeypatch)
    old = "Name {{ display_name | nsis }}"
    text = _nsis_override().replace(old, "Name {{ (display_name * 2000) | nsis }}", 1)
    root = _project(tmp_path / "p", {"templates/installer.nsi.j2": text})
    package = make_package_input(
        tmp_path / "in", "windows-x86_64", templates=find_overrides(root, ("templates",))
    )
    line = text.splitlines().index("Name {{ (display_name * 2000) | nsis }}") + 1
    with pytest.raises(ConfigError) as caught:
        NsisChannel().generate(package, tmp_path / "out")
    assert caught.value.file == f"templates/installer.nsi.j2:{line}"
    assert "longer than NSIS's" in str(caught.value)


def _licensing() -> TargetLicensing:
    """Two components as a NOTICE must attribute them: one with two texts, one without."""
    texts = (
        StagedText("onnxruntime", "licenses/onnxruntime/LICENSE", "LICENSE", 1, "ab" * 32),
        StagedText("onnxruntime", "licenses/onnxruntime/ThirdPartyNotices.txt", "T", 1, "cd" * 32),
    )
    uses = (
        ComponentUse(
            name=name,
            version="1.0",
            expression=expression,
            license_ids=(expression,),
            purl=f"pkg:generic/{name}@1.0",
            files=(StagedFile(f"runtimes/cpu/lib{name}.so", 1, "ef" * 32),),
            texts=own,
            copyrights=(),
            sources=(),
        )
        for name, expression, own in (("mlx", "MIT", ()), ("onnxruntime", "Apache-2.0", texts))
    )
    return TargetLicensing("linux-x86_64", tuple(uses))


def test_a_notice_template_must_still_name_every_component_licence_and_text(
    tmp_path: Path,
) -> None:
    """A replacement may word NOTICE as it likes, but not drop what the licences ask for."""
    licensing = _licensing()
    builtin = notice_text("demo", "1", licensing, memo=Memo.off())
    assert "licenses/onnxruntime/ThirdPartyNotices.txt" in builtin
    terse = (
        "{% for c in licensing.components %}{{ c.name }}: {{ c.expression }} "
        "{{ c.texts | map(attribute='path') | join(', ') }}\n{% endfor %}"
    )
    project = _project(tmp_path / "terse", {"templates/NOTICE.j2": terse})
    rendered = notice_text(
        "demo", "1", licensing, memo=Memo.off(), overrides=find_overrides(project, ["templates"])
    )
    assert rendered.splitlines()[1] == (
        "onnxruntime: Apache-2.0 licenses/onnxruntime/LICENSE, "
        "licenses/onnxruntime/ThirdPartyNotices.txt"
    )
    first_text = (  # only each component's first text
        "{% for c in licensing.components %}{{ c.name }}: {{ c.expression }} "
        "{% for t in c.texts[:1] %}{{ t.path }}{% endfor %}\n{% endfor %}"
    )
    names_only = "{% for c in licensing.components %}{{ c.name }}\n{% endfor %}"
    for template, left_out in (
        (
            first_text,
            "onnxruntime (text 'licenses/onnxruntime/ThirdPartyNotices.txt')",
        ),
        (
            names_only,
            "mlx (licence 'MIT'); onnxruntime (licence 'Apache-2.0', text "
            "'licenses/onnxruntime/LICENSE', text 'licenses/onnxruntime/ThirdPartyNotices.txt')",
        ),
    ):
        project = _project(tmp_path / str(len(template)), {"templates/NOTICE.j2": template})
        with pytest.raises(LicenseError) as refused:
            notice_text(
                "demo",
                "1",
                licensing,
                memo=Memo.off(),
                overrides=find_overrides(project, ["templates"]),
            )
        assert str(refused.value) == (
            "the NOTICE for linux-x86_64 leaves out what its licences require it to say: "
            f"{left_out} [target linux-x86_64, file templates/NOTICE.j2] — fix: render each "
            "component of licensing.components with its name, expression and every text's "
            "path, as the built-in template does (invoke templates --copy NOTICE.j2 shows it)"
        )
        assert refused.value.exit_code == 9
