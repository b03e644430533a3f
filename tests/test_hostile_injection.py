"""Hostile inputs, injection: product text and staged file names that are shell, NSIS and JSON
metacharacters, through the real build and into the real PKGBUILD, NSIS script and Flatpak
manifest.

Each channel already has unit tests with hostile strings (tests/test_channel_arch.py
test_description_is_inert_in_bash / test_url_is_inert_in_bash, tests/test_channel_nsis.py
test_injected_strings_are_escaped_in_the_script / test_injected_strings_compile_and_come_out_
literally, tests/test_channel_flatpak.py test_injection_strings_in_free_text_stay_inert). Here
the strings come in the way a user would write them — in the product manifest, the recipe and
the wheel's member names — and the generated files are exercised: the PKGBUILD is sourced and
its package() run, the installer compiled and unpacked, the manifest parsed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pefile
import pytest

from ortbundle._core.progress import Reporter
from ortbundle.cli.build import run_build
from ortbundle.cli.common import CommandFailed
from ortbundle.pipeline.build import build
from ortbundle.pipeline.result import BuildResult
from tests.helpers.elf import make_elf
from tests.helpers.faults import (
    assert_published_and_verified,
    rewrite_with_csv_record,
    set_roots,
)
from tests.helpers.pe import make_pe
from tests.helpers.project import FakeProject

# A file name is one path component: no '/' (a directory) or NUL; the Windows one also keeps
# to what Windows can hold (no " < > : | ? * \) and has no '$' (the NSIS channel refuses one
# in a stage path by design: see test_a_dollar_in_a_windows_file_name_is_refused).
LINUX_LIB = "lib$(touch ${IFS}pwned)`touch pwned`'q\"${HOME};$INSTDIR &.so"
WINDOWS_DLL = "evil(touch pwned)`id`'q' {NSISDIR} %PATH% ;&.dll"


def hostile(marker: Path) -> str:
    return (
        f"Evil \"double\" 'single' $(touch {marker}) `touch {marker}` ${{IFS}} $HOME "
        f"${{NSISDIR}} $INSTDIR $$ $\\n $(^Name) $%PATH% %PATH% \\ ; # && || > {marker}\n"
        "second line\tafter a tab"
    )


def _toml(value: str) -> str:
    return json.dumps(value)  # a TOML basic string takes JSON's escapes


def write_hostile_project(fake: FakeProject, marker: Path) -> None:
    fake.linux[f"onnxruntime/capi/{LINUX_LIB}"] = make_elf(soname="libhostile.so")
    fake.windows[f"onnxruntime/capi/{WINDOWS_DLL}"] = make_pe(imports=("kernel32.dll",))
    fake.write()
    set_roots(fake, "linux-x86_64", [*fake.linux_roots, LINUX_LIB])
    set_roots(fake, "windows-x86_64", [*fake.windows_roots, WINDOWS_DLL])
    text = hostile(marker)
    manifest = fake.root / "manifests" / "fakeproduct.toml"
    body = manifest.read_text()
    body = body.replace('description = "A synthetic product"', f"description = {_toml(text)}")
    body = body.replace(
        'url = "https://example.invalid/"',
        f"url = {_toml(f'https://example.invalid/?a=$(touch{marker})&b=`id`&c=$INSTDIR')}",
    )
    body += f"\n[packaging]\npublisher = {_toml(text.replace(chr(10), ' '))}\n"
    manifest.write_text(body)
    recipe = fake.root / "recipes" / "fake.toml"
    recipe.write_text(
        recipe.read_text().replace(
            'description = "Fake runtime"',
            f"description = {_toml(text)}\nlabel = {_toml('Fake $(touch x) `y` $INSTDIR')}",
        )
    )


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "pwned"


@pytest.fixture
def built(fake: FakeProject, reporter: Reporter, marker: Path) -> BuildResult:
    write_hostile_project(fake, marker)
    result = build(fake.project, fake.options(), reporter)
    assert not marker.exists()
    assert_published_and_verified(fake)
    return result


def _bash(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env={"PATH": os.environ["PATH"], "HOME": str(cwd), **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_pkgbuild_holds_the_strings_as_data_and_installs_hostile_names_literally(
    built: BuildResult, fake: FakeProject, marker: Path, tmp_path: Path
) -> None:
    arch = built.version_dir / "packaging" / "arch"
    assert _bash("bash -n PKGBUILD", arch).returncode == 0
    shown = _bash('source ./PKGBUILD && printf "%s\\n%s" "$pkgdesc" "$url"', arch)
    assert shown.returncode == 0, shown.stderr
    pkgdesc, url = shown.stdout.split("\n")
    assert pkgdesc == " ".join(hostile(marker).split())  # newline and tab collapse to spaces
    assert url == built.plan.product.url
    assert f"\tpkgdesc = {pkgdesc}\n" in (arch / ".SRCINFO").read_text()
    # run package() as makepkg would: srcdir holds the unpacked source, pkgdir is empty
    srcdir, pkgdir = tmp_path / "src", tmp_path / "pkg"
    srcdir.mkdir()
    pkgdir.mkdir()
    (tarball,) = arch.glob("*.tar.gz")
    with tarfile.open(tarball) as archive:
        archive.extractall(srcdir, filter="tar")
    ran = _bash("set -e; source ./PKGBUILD; package", arch, srcdir=str(srcdir), pkgdir=str(pkgdir))
    assert ran.returncode == 0, ran.stderr
    assert not marker.exists() and not (arch / "pwned").exists() and not (srcdir / "pwned").exists()
    installed = pkgdir / "usr" / "lib" / "fakeproduct-onnxruntime" / "runtimes" / "fake" / LINUX_LIB
    staged = built.version_dir / "linux-x86_64" / "runtimes" / "fake" / LINUX_LIB
    assert installed.read_bytes() == staged.read_bytes()


def test_flatpak_manifest_holds_the_strings_as_data(built: BuildResult, marker: Path) -> None:
    flatpak = built.version_dir / "packaging" / "flatpak"
    (module_file,) = flatpak.glob("*.module.json")
    raw = module_file.read_bytes()
    assert raw.isascii()
    module = json.loads(raw)
    meta = module["x-ortbundle"]
    assert meta["description"] == hostile(marker) and meta["url"] == built.plan.product.url
    for command in module["build-commands"]:
        assert str(marker) not in command and "$(" not in command and "`" not in command
    (tarball,) = flatpak.glob("*.tar.gz")
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
    assert any(name.endswith(f"runtimes/fake/{LINUX_LIB}") for name in names)


def test_nsis_script_quotes_every_string(built: BuildResult, marker: Path) -> None:
    script = (built.version_dir / "packaging" / "nsis" / "installer.nsi").read_text("utf-8-sig")
    assert script.count("$(touch") == script.count("$$(touch") > 0  # `$` always doubled
    for line in script.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(";"):
            continue
        unescaped = stripped.replace('$\\"', "")
        assert unescaped.count('"') % 2 == 0, line  # no user text outside a quoted token
    assert "${NSISDIR}" not in script and "$%PATH%" not in script  # never left to expand


@pytest.mark.tools
def test_installer_compiles_and_carries_hostile_names_and_strings_literally(
    built: BuildResult, marker: Path, tmp_path: Path
) -> None:
    if shutil.which("makensis") is None or shutil.which("7z") is None:
        pytest.skip("makensis and 7z are needed (Debian/Ubuntu: apt-get install nsis p7zip-full)")
    nsis = built.version_dir / "packaging" / "nsis"
    (exe,) = nsis.glob("*-setup.exe")
    out = tmp_path / "unpacked"
    unpacked = subprocess.run(
        ["7z", "x", "-y", f"-o{out}", str(exe)], capture_output=True, text=True, check=False
    )
    assert unpacked.returncode == 0, unpacked.stdout + unpacked.stderr
    stage = built.version_dir / "windows-x86_64"
    dll = next(p for p in out.rglob("*.dll") if p.name == WINDOWS_DLL)
    assert dll.read_bytes() == (stage / "runtimes" / "fake" / WINDOWS_DLL).read_bytes()
    strings: dict[str, str] = {}
    pe = pefile.PE(str(exe))
    try:
        for info in getattr(pe, "FileInfo", [[]])[0]:
            for table in getattr(info, "StringTable", []):
                for key, value in table.entries.items():
                    strings[key.decode()] = value.decode("utf-8", errors="replace")
    finally:
        pe.close()
    assert strings["CompanyName"] == built.plan.product.packaging.publisher
    assert strings["FileDescription"] == built.plan.product.description
    assert not marker.exists()


@pytest.mark.tools
def test_deb_and_rpm_carry_hostile_names_and_strings_literally(
    built: BuildResult, marker: Path, tmp_path: Path
) -> None:
    """nfpm expands $VAR in some fields and globs sources: neither may touch product text."""
    if shutil.which("dpkg-deb") is None or shutil.which("rpm") is None:
        pytest.skip("dpkg-deb and rpm are needed (Debian/Ubuntu: apt-get install dpkg rpm)")
    packaging = built.version_dir / "packaging"
    (deb,) = (packaging / "deb").glob("*.deb")
    (rpm,) = (packaging / "rpm").glob("*.rpm")
    library = (built.version_dir / "linux-x86_64" / "runtimes" / "fake" / LINUX_LIB).read_bytes()
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path / "deb")], check=True)
    (found,) = [p for p in (tmp_path / "deb").rglob("*.so") if p.name == LINUX_LIB]
    assert found.read_bytes() == library
    listed = subprocess.run(["rpm", "-qlp", str(rpm)], capture_output=True, text=True, check=True)
    assert f"/runtimes/fake/{LINUX_LIB}\n" in listed.stdout
    one_line = " ".join(hostile(marker).split())
    control = subprocess.run(
        ["dpkg-deb", "-f", str(deb), "Description", "Homepage", "Maintainer"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # folded onto several lines; $HOME, ${IFS} and $(…) as written, not expanded by nfpm
    assert " ".join(control.split()).count(one_line) == 1
    assert f"Homepage: {built.plan.product.url}\n" in control
    query = "%{url}\\n%{vendor}\\n%{description}"
    shown = subprocess.run(
        ["rpm", "-qp", "--qf", query, str(rpm)], capture_output=True, text=True, check=True
    ).stdout
    url, vendor, description = shown.split("\n", 2)
    assert url == built.plan.product.url
    assert vendor == " ".join(built.plan.product.packaging.publisher.split())
    assert one_line in " ".join(description.split())
    assert not marker.exists()


REFUSED = {
    # where: (how to make it hostile, what the error names)
    "product-name": ('name = "fakeproduct"', 'name = "fake$(touch x)"', "name"),
    "package-name": (
        "[product]",
        '[packaging]\npackage_name = "x;`id`"\n[product]',
        "package_name",
    ),
    "flatpak-command": (
        "[product]",
        '[packaging]\nflatpak_command = "run $(id)"\n[product]',
        "flatpak_command",
    ),
    "control-character": (
        'description = "A synthetic product"',
        'description = "bell \\u0007 and escape \\u001b[31m"',
        "control characters",
    ),
}


@pytest.mark.parametrize("case", REFUSED)
def test_strings_that_cannot_be_made_inert_are_refused(
    fake: FakeProject, marker: Path, case: str
) -> None:
    fake.write()
    old, new, names = REFUSED[case]
    manifest = fake.root / "manifests" / "fakeproduct.toml"
    manifest.write_text(manifest.read_text().replace(old, new, 1))
    with pytest.raises(CommandFailed) as failed:
        run_build(fake.options(), root=fake.root)
    assert failed.value.code == 2 and names in str(failed.value)
    assert not (fake.root / "dist" / "fakeproduct" / "1.2.3").exists()
    assert not marker.exists() and not (fake.root / "x").exists()


def test_a_staged_name_with_a_newline_is_refused_not_mangled(fake: FakeProject) -> None:
    name = "lib\n$(touch pwned).so"
    fake.linux[f"onnxruntime/capi/{name}"] = make_elf(soname="libnl.so")
    fake.write()
    rewrite_with_csv_record(fake, "linux-x86_64")
    set_roots(fake, "linux-x86_64", [*fake.linux_roots, name])
    with pytest.raises(CommandFailed) as failed:
        run_build(fake.options(), root=fake.root)
    # refused as the archive is opened, naming the member (it was an untyped exit 1 from the
    # Arch channel, whose fix told the user to rebuild the stage)
    assert failed.value.code == 6, str(failed.value)
    assert "contains a control character" in str(failed.value)
    assert "$(touch pwned).so" in str(failed.value)
    assert not (fake.root / "dist" / "fakeproduct" / "1.2.3").exists()
    assert not list(fake.root.rglob("pwned"))


def test_a_dollar_in_a_windows_file_name_is_refused(fake: FakeProject) -> None:
    name = "evil$INSTDIR${NSISDIR}$%PATH%$(^Name).dll"
    fake.windows[f"onnxruntime/capi/{name}"] = make_pe(imports=("kernel32.dll",))
    fake.write()
    set_roots(fake, "windows-x86_64", [*fake.windows_roots, name])
    with pytest.raises(CommandFailed) as failed:
        run_build(fake.options(), root=fake.root)
    assert failed.value.code == 2 and "contains '$'" in str(failed.value)
    assert name in str(failed.value)
    assert not (fake.root / "dist" / "fakeproduct" / "1.2.3").exists()
