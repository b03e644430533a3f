"""Arch channel: PKGBUILD fields, derived dependencies, inert strings, byte-stable output, and
the real makepkg agreeing with us (.SRCINFO, checksums, and a full package build)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError, OrtbundleError
from ortbundle.channels import ChannelOutput, PackageInput
from ortbundle.channels.arch import ArchChannel
from ortbundle.licensing.attribution import ShippedFile
from ortbundle.stage.closure import ExternalLibrary
from tests.helpers.makepkg import APT_HINT, Makepkg, unprivileged_makepkg
from tests.helpers.packages import EPOCH, make_package_input

BASH_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}
INJECTIONS = (
    "$(touch {marker})",
    "`touch {marker}`",
    "it's a 'quoted' \"thing\" ${{x}} $x \\ ! ;touch {marker}; #",
    "line one\nline two\r\n\tand '$(touch {marker})'\n",
    "ünïcode — ok ${{IFS}}`touch {marker}`",
)
URL_INJECTIONS = (  # no whitespace: a URL holding any is refused
    "$(touch${{IFS}}{marker})",
    "`touch${{IFS}}{marker}`",
    "'$(touch${{IFS}}{marker})'\"${{x}}\"",
    '"`touch${{IFS}}{marker}`"\\',
)


# Each Linux target with what Arch (and Arch Linux ARM) calls its machine.
ARCHES = {"linux-x86_64": "x86_64", "linux-aarch64": "aarch64"}


def package_at(root: Path, target: str = "linux-x86_64", **overrides: object) -> PackageInput:
    return make_package_input(root, target, **overrides)


def generate(package: PackageInput, out: Path) -> ChannelOutput:
    return ArchChannel().generate(package, out)


def with_files(package: PackageInput, extra: dict[str, bytes]) -> PackageInput:
    """The package with more regular files written into its stage."""
    files = list(package.files)
    for path, data in extra.items():
        dest = package.stage / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        dest.chmod(0o644)
        files.append(ShippedFile(path, len(data), hashlib.sha256(data).hexdigest(), 0o644))
    return replace(package, files=tuple(sorted(files, key=lambda f: f.path)))


def bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", script],
        cwd=cwd,
        env=BASH_ENV,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def sourced(out: Path, name: str) -> list[str]:
    """The values of PKGBUILD variable `name`, as bash sees them after sourcing it."""
    result = bash(
        f'source ./PKGBUILD && for v in "${{{name}[@]}}"; do printf "%s\\0" "$v"; done', out
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split("\0")[:-1]


def externals(*groups: str) -> tuple[ExternalLibrary, ...]:
    names = {"glibc": "libc.so.6", "gcc-libs": "libgcc_s.so.1", "zlib": "libz.so.1"}
    names |= {"opencl": "libOpenCL.so.1", "vulkan": "libvulkan.so.1"}
    return tuple(
        ExternalLibrary(names.get(g, f"lib{g}.so.1"), g, "system", "", ("runtimes/x.so",))
        for g in groups
    )


# ---------------------------------------------------------------------------- content


def test_pkgbuild_fields_and_output(tmp_path: Path) -> None:
    package = package_at(tmp_path / "in")
    result = generate(package, tmp_path / "out")
    out = tmp_path / "out"
    tarball = out / "demo-onnxruntime-1.0.0.tar.gz"
    assert result.channel == "arch"
    assert result.files == (out / ".SRCINFO", out / "PKGBUILD", tarball)
    assert sorted(p.name for p in out.iterdir()) == [".SRCINFO", "PKGBUILD", tarball.name]
    assert sourced(out, "pkgname") == ["demo-onnxruntime"]
    assert sourced(out, "pkgver") == ["1.0.0"]
    assert sourced(out, "pkgrel") == ["1"]
    assert sourced(out, "arch") == ["x86_64"]
    assert sourced(out, "license") == ["Apache-2.0", "MIT"]
    assert sourced(out, "depends") == ["gcc-libs", "glibc"]
    assert sourced(out, "optdepends") == [
        "intel-compute-runtime: Intel OpenCL driver, for the Intel GPU (OpenVINO) rung",
        "ocl-icd: OpenCL ICD loader, for the Intel GPU (OpenVINO) rung",
    ]
    assert {"!strip", "!debug"} <= set(sourced(out, "options"))
    assert sourced(out, "source") == [tarball.name]
    assert sourced(out, "sha256sums") == [hashlib.sha256(tarball.read_bytes()).hexdigest()]
    assert any("glibc: for libc.so.6, libm.so.6" in note for note in result.notes)
    assert any("ocl-icd: for libOpenCL.so.1 (group opencl)" in note for note in result.notes)
    text = (out / "PKGBUILD").read_text() + (out / ".SRCINFO").read_text()
    assert str(tmp_path) not in text


def test_tarball_holds_the_stage_under_its_prefix(tmp_path: Path) -> None:
    package = package_at(tmp_path / "in")
    generate(package, tmp_path / "out")
    with tarfile.open(tmp_path / "out/demo-onnxruntime-1.0.0.tar.gz") as tar:
        names = {m.name for m in tar.getmembers() if not m.isdir()}
    assert names == {f"demo-onnxruntime-1.0.0/{f.path}" for f in package.files}


@pytest.mark.parametrize(
    ("groups", "depends", "optdepends"),
    [
        ((), [], []),
        (("zlib", "zlib", "glibc"), ["glibc", "zlib"], []),
        (("vulkan",), [], ["vulkan-icd-loader: Vulkan loader, for the WebGPU rung"]),
        (
            ("opencl", "vulkan", "gcc-libs"),
            ["gcc-libs"],
            [
                "intel-compute-runtime: Intel OpenCL driver, for the Intel GPU (OpenVINO) rung",
                "ocl-icd: OpenCL ICD loader, for the Intel GPU (OpenVINO) rung",
                "vulkan-icd-loader: Vulkan loader, for the WebGPU rung",
            ],
        ),
    ],
)
def test_dependencies_come_only_from_present_externals(
    tmp_path: Path, groups: tuple[str, ...], depends: list[str], optdepends: list[str]
) -> None:
    generate(package_at(tmp_path / "in", externals=externals(*groups)), tmp_path / "out")
    assert sourced(tmp_path / "out", "depends") == depends
    assert sourced(tmp_path / "out", "optdepends") == optdepends
    srcinfo = (tmp_path / "out/.SRCINFO").read_text()
    assert [line for line in srcinfo.splitlines() if "depends = " in line] == [
        *(f"\tdepends = {d}" for d in depends),
        *(f"\toptdepends = {o}" for o in optdepends),
    ]


def test_unmapped_group_is_an_error_naming_library_group_and_manifest(tmp_path: Path) -> None:
    package = replace(package_at(tmp_path / "in"), manifest="manifests/demo.toml")
    odd = ExternalLibrary("libcuda.so.1", "cuda", "driver", "", ("runtimes/x.so",))
    odder = ExternalLibrary("libfoo.so.2", "foo", "toolkit", "", ("runtimes/x.so",))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ConfigError) as error:
        generate(replace(package, externals=(*package.externals, odd, odder)), out)
    message = str(error.value)
    assert "libcuda.so.1 (group cuda)" in message and "libfoo.so.2 (group foo)" in message
    assert error.value.file == "manifests/demo.toml"  # the product's, not the tool's data
    assert "ortbundle/data" not in message
    fix = str(error.value.fix)
    assert 'group = "cuda"\nkind = "driver"' in fix and 'names = ["libcuda.so.1"]' in fix
    assert 'group = "foo"\nkind = "toolkit"' in fix and "arch = { depends" in fix
    assert list(out.iterdir()) == []  # refused before anything was written


@pytest.mark.parametrize("name", ["Demo", "-demo", ".demo", "de mo", "de/mo", "démo", ""])
def test_pkgname_must_follow_arch_rules(tmp_path: Path, name: str) -> None:
    package = package_at(tmp_path / "in")
    settings = replace(package.settings, package_name=name)
    with pytest.raises(ConfigError, match="package name"):
        generate(replace(package, settings=settings), tmp_path / "out")


@pytest.mark.parametrize("pkgrel", [0, -1, True])
def test_pkgrel_must_be_a_positive_integer(tmp_path: Path, pkgrel: int) -> None:
    package = package_at(tmp_path / "in")
    with pytest.raises(ConfigError, match="pkgrel"):
        generate(replace(package, settings=replace(package.settings, pkgrel=pkgrel)), tmp_path)


def test_prerelease_hyphen_is_dropped(tmp_path: Path) -> None:
    result = generate(package_at(tmp_path / "in", version="1.20.0-rc1"), tmp_path / "out")
    assert sourced(tmp_path / "out", "pkgver") == ["1.20.0rc1"]
    assert sourced(tmp_path / "out", "source") == ["demo-onnxruntime-1.20.0rc1.tar.gz"]
    assert any("1.20.0rc1 stands for version 1.20.0-rc1" in note for note in result.notes)


@pytest.mark.parametrize(
    "version", ["1:2.0", "1.0/2", "1 .0", "1.0~rc1", "é1", "", "_1", "1.0.0-1", "1.0-"]
)
def test_version_arch_cannot_hold_is_refused(tmp_path: Path, version: str) -> None:
    with pytest.raises(ConfigError, match="pkgver"):
        generate(package_at(tmp_path / "in", version=version), tmp_path / "out")


@pytest.mark.tools
def test_mapped_prerelease_sorts_before_the_release() -> None:
    if shutil.which("vercmp") is None:
        pytest.skip(f"vercmp not installed ({APT_HINT})")
    result = subprocess.run(
        ["vercmp", "1.20.0rc1", "1.20.0"], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "-1"


# ---------------------------------------------------------------------------- hostile strings


@pytest.mark.parametrize("template", INJECTIONS)
def test_description_is_inert_in_bash(tmp_path: Path, template: str) -> None:
    marker = tmp_path / "pwned"
    description = template.format(marker=marker)
    generate(package_at(tmp_path / "in", description=description), tmp_path / "out")
    out = tmp_path / "out"
    assert bash("bash -n PKGBUILD", out).returncode == 0
    shown = bash('source ./PKGBUILD && printf %s "$pkgdesc"', out)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == " ".join(description.split())  # newlines collapse, as .SRCINFO does
    assert f"\tpkgdesc = {shown.stdout}\n" in (out / ".SRCINFO").read_text()
    assert not marker.exists()


@pytest.mark.parametrize("template", URL_INJECTIONS)
def test_url_is_inert_in_bash(tmp_path: Path, template: str) -> None:
    marker = tmp_path / "pwned"
    url = "https://demo.invalid/" + template.format(marker=marker)
    generate(package_at(tmp_path / "in", url=url), tmp_path / "out")
    shown = bash('source ./PKGBUILD && printf %s "$url"', tmp_path / "out")
    assert (shown.returncode, shown.stdout) == (0, url)
    assert not marker.exists()


@pytest.mark.parametrize("url", ["https://demo.invalid/\n$(id)", "https://demo .invalid/"])
def test_url_with_whitespace_is_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigError, match="url"):
        generate(package_at(tmp_path / "in", url=url), tmp_path / "out")


@pytest.mark.parametrize("description", ["red \x1b[31m text", "nul \x00 byte", "rtl \u202e txt"])
def test_control_characters_are_refused(tmp_path: Path, description: str) -> None:
    with pytest.raises(ConfigError, match="control characters"):
        generate(package_at(tmp_path / "in", description=description), tmp_path / "out")


@pytest.mark.parametrize(
    ("path", "link_to"),
    [("../escape", None), ("/abs", None), ("a/./b", None), ("runtimes/l.so", "../../x")],
)
def test_stage_entries_must_stay_inside_the_package(
    tmp_path: Path, path: str, link_to: str | None
) -> None:
    package = package_at(tmp_path / "in")
    bad = ShippedFile(path, 1, "0" * 64, 0o777 if link_to else 0o644, link_to=link_to)
    with pytest.raises(OrtbundleError, match="stage entry"):
        generate(replace(package, files=(*package.files, bad)), tmp_path / "out")


# ---------------------------------------------------------------------------- reproducibility


def test_two_generates_are_byte_identical(tmp_path: Path) -> None:
    first = generate(package_at(tmp_path / "a"), tmp_path / "out-a")
    second = generate(package_at(tmp_path / "elsewhere/b"), tmp_path / "out-b")
    assert [p.name for p in first.files] == [p.name for p in second.files]
    for a, b in zip(first.files, second.files, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
    assert first.notes == second.notes


def test_the_arch_is_the_targets_own(tmp_path: Path) -> None:
    """Arch Linux ARM's package says aarch64, from the target's data; the rest is the same."""
    for target, arch in ARCHES.items():
        out = tmp_path / target
        generate(package_at(tmp_path / "in", target), out)
        assert sourced(out, "arch") == [arch]
        assert f"\tarch = {arch}\n" in (out / ".SRCINFO").read_text()
        assert sourced(out, "depends") == ["gcc-libs", "glibc"]


def test_refuses_a_non_empty_directory_and_other_targets(tmp_path: Path) -> None:
    package = package_at(tmp_path / "in")
    (tmp_path / "out").mkdir()
    (tmp_path / "out/stale").write_text("x")
    with pytest.raises(OrtbundleError, match="not empty"):
        generate(package, tmp_path / "out")
    with pytest.raises(OrtbundleError, match="linux-x86_64"):
        generate(replace(package, target="windows-x86_64"), tmp_path / "other")


# ---------------------------------------------------------------------------- real makepkg


@pytest.fixture
def makepkg() -> Iterator[Makepkg]:
    with unprivileged_makepkg() as found:
        yield found


def assert_ok(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"


@pytest.mark.tools
@pytest.mark.parametrize(
    ("variant", "target"),
    [
        ("default", "linux-x86_64"),
        ("default", "linux-aarch64"),
        ("hostile", "linux-x86_64"),
        ("prerelease-bare", "linux-x86_64"),
    ],
)
def test_srcinfo_equals_makepkg_printsrcinfo(
    tmp_path: Path, makepkg: Makepkg, variant: str, target: str
) -> None:
    marker = makepkg.root / "pwned"  # writable by makepkg's user: proof nothing ran
    variants: dict[str, dict[str, object]] = {
        "default": {},
        "hostile": {
            "description": "  ".join(t.format(marker=marker) for t in INJECTIONS),
            "url": "https://demo.invalid/"
            + "".join(t.format(marker=marker) for t in URL_INJECTIONS),
        },
        "prerelease-bare": {"version": "2.0.0-rc.1+local", "url": "", "externals": ()},
    }
    overrides = variants[variant]
    generate(package_at(tmp_path / "in", target, **overrides), tmp_path / "out")
    startdir = makepkg.copy(tmp_path / "out", "pkg")
    result = makepkg.run(startdir, "--printsrcinfo", carch=ARCHES[target])
    assert_ok(result)
    assert result.stdout == (tmp_path / "out/.SRCINFO").read_text(encoding="utf-8")
    assert not marker.exists()


@pytest.mark.tools
def test_makepkg_verifies_the_source_and_catches_a_changed_tarball(
    tmp_path: Path, makepkg: Makepkg
) -> None:
    generate(package_at(tmp_path / "in"), tmp_path / "out")
    good = makepkg.copy(tmp_path / "out", "good")
    assert_ok(makepkg.run(good, "--verifysource"))
    bad = makepkg.copy(tmp_path / "out", "bad")
    tarball = bad / "demo-onnxruntime-1.0.0.tar.gz"
    data = bytearray(tarball.read_bytes())
    data[len(data) // 2] ^= 0xFF
    tarball.write_bytes(bytes(data))
    result = makepkg.run(bad, "--verifysource")
    assert result.returncode != 0
    assert "FAILED" in result.stdout + result.stderr


@pytest.mark.tools
def test_makepkg_refuses_the_aarch64_package_on_another_machine(
    tmp_path: Path, makepkg: Makepkg
) -> None:
    """The arch array is real: makepkg for x86_64 will not build Arch Linux ARM's package."""
    generate(package_at(tmp_path / "in", "linux-aarch64"), tmp_path / "out")
    startdir = makepkg.copy(tmp_path / "out", "pkg")
    result = makepkg.run(startdir, "-f", "--nodeps", carch="x86_64")
    assert result.returncode != 0
    assert "is not available for the 'x86_64' architecture" in result.stdout + result.stderr


@pytest.mark.tools
@pytest.mark.parametrize("target", list(ARCHES))
def test_makepkg_builds_the_stage_unchanged(tmp_path: Path, makepkg: Makepkg, target: str) -> None:
    # Files makepkg's tidy steps would drop or rewrite by name unless the options say no.
    package = with_files(
        package_at(tmp_path / "in", target),
        {
            "runtimes/openvino/libextra.a": b"!<arch>\n",
            "runtimes/openvino/libextra.so": b"not really a library\n",
            "runtimes/openvino/libextra.la": b"# libtool archive\n",
            "runtimes/openvino/notes.pod": b"=pod\n",
        },
    )
    generate(package, tmp_path / "out")
    startdir = makepkg.copy(tmp_path / "out", "pkg")
    assert_ok(makepkg.run(startdir, "-f", "--nodeps", carch=ARCHES[target]))
    (built,) = (makepkg.root / "pkgdest").glob(
        f"demo-onnxruntime-1.0.0-1-{ARCHES[target]}.pkg.tar.*"
    )

    lib, share = "usr/lib/demo-onnxruntime", "usr/share/licenses/demo-onnxruntime"
    expected: dict[str, tuple[str, int, str]] = {}  # name → (kind, mode, sha256 or link target)
    for f in package.files:
        if f.link_to is not None:
            expected[f"{lib}/{f.path}"] = ("link", 0o777, f.link_to)
        else:
            expected[f"{lib}/{f.path}"] = ("file", f.mode, f.sha256)
        if f.path == "NOTICE" or f.path.startswith("licenses/"):
            expected[f"{share}/{f.path.removeprefix('licenses/')}"] = ("file", 0o644, f.sha256)
    for name in list(expected):
        parts = name.split("/")
        for depth in range(1, len(parts)):
            expected["/".join(parts[:depth])] = ("dir", 0o755, "")

    found: dict[str, tuple[str, int, str]] = {}
    with tarfile.open(built, "r:gz") as tar:
        for member in tar.getmembers():
            assert (member.uid, member.gid, member.mtime) == (0, 0, EPOCH), member.name
            if member.name.startswith("."):
                continue
            name = member.name.rstrip("/")
            if member.issym():
                found[name] = ("link", member.mode, member.linkname)
            elif member.isdir():
                found[name] = ("dir", member.mode, "")
            else:
                data = tar.extractfile(member)
                assert data is not None
                found[name] = ("file", member.mode, hashlib.sha256(data.read()).hexdigest())
        pkginfo_file = tar.extractfile(".PKGINFO")
        assert pkginfo_file is not None
        pkginfo = pkginfo_file.read().decode()
    assert found == expected
    for line in (
        "pkgver = 1.0.0-1",
        f"arch = {ARCHES[target]}",
        f"builddate = {EPOCH}",
        "depend = gcc-libs",
        "depend = glibc",
        "optdepend = ocl-icd: OpenCL ICD loader, for the Intel GPU (OpenVINO) rung",
        "license = Apache-2.0",
        "license = MIT",
    ):
        assert f"\n{line}\n" in pkginfo
