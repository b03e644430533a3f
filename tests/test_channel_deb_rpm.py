"""deb and rpm channels: relations from the externals, DEP-5 copyright, inert strings, and the
real tools agreeing — lintian and rpmlint, the package contents against the stage, a scratch
install whose shipped loader opens each runtime, and byte-identical rebuilds."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError, OrtbundleError
from ortbundle._core.overrides import BUILTIN_DIR, find_overrides
from ortbundle.channels import ChannelOutput, PackageInput
from ortbundle.channels.deb import DebChannel, copyright_text
from ortbundle.channels.nfpm import long_description, render_dependencies
from ortbundle.channels.rpm import RpmChannel
from ortbundle.channels.step import generate_all
from ortbundle.licensing.attribution import ShippedFile
from ortbundle.stage.closure import ExternalLibrary
from tests.helpers.linux_packages import (
    OVERRIDE_ENV,
    RUNTIMES,
    deb_listing,
    make_loadable_package,
    open_each_runtime,
    rpm_listing,
    stage_listing,
)
from tests.helpers.packages import make_package_input

PREFIX = "/usr/lib/demo-onnxruntime"
Channel = DebChannel | RpmChannel


def build(channel: Channel, package: PackageInput, out: Path) -> tuple[ChannelOutput, Path]:
    output = channel.generate(package, out)
    (built,) = (f for f in output.files if f.suffix in (".deb", ".rpm"))
    return output, built


def need(*tools: str, packages: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (Debian: apt-get install {packages})")


def lintian(deb: Path) -> subprocess.CompletedProcess[str]:
    """lintian on the package, warnings and errors shown, no local configuration."""
    return subprocess.run(
        ["lintian", "--no-cfg", "--display-level", ">=warning", str(deb)],
        capture_output=True,
        text=True,
        check=False,
    )


def assert_lintian_accepts(deb: Path) -> None:
    result = lintian(deb)
    findings = [line for line in result.stdout.splitlines() if re.match(r"[EW]: ", line)]
    assert (findings, result.returncode) == ([], 0), result.stdout + result.stderr


def external(name: str, group: str) -> ExternalLibrary:
    return ExternalLibrary(name, group, "system", "", ("runtimes/x/libx.so",))


# --- relations, metadata, DEP-5: no external tool but nfpm --------------------------------


def test_relations_come_from_the_externals_and_a_hard_one_is_not_repeated() -> None:
    externals = [
        external("libc.so.6", "glibc"),
        external("libm.so.6", "glibc"),
        external("libstdc++.so.6", "gcc-libs"),
        external("libOpenCL.so.1", "opencl"),
        external("libvulkan.so.1", "vulkan"),
    ]
    deb = render_dependencies(externals, "deb", "linux-x86_64")
    assert deb.depends == ("libc6", "libgcc-s1 | libgcc1", "libstdc++6")
    assert deb.recommends == ("libvulkan1", "ocl-icd-libopencl1")
    assert deb.suggests == ("intel-opencl-icd",)
    assert "depends libc6: for libc.so.6, libm.so.6" in deb.notes
    rpm = render_dependencies(externals, "rpm", "linux-x86_64")
    # RPM names libraries by soname capability, as rpmbuild's find-requires does
    assert rpm.depends == ("libc.so.6()(64bit)", "libm.so.6()(64bit)", "libstdc++.so.6()(64bit)")
    assert rpm.recommends == ("ocl-icd", "vulkan-loader")
    assert render_dependencies([external("libz.so.1", "zlib")], "deb", "linux-x86_64").depends == (
        "zlib1g",
    )
    assert render_dependencies([], "rpm", "linux-x86_64").depends == ()


def test_relations_carry_the_versions_the_binaries_need() -> None:
    from ortbundle.stage.binaries.baseline import Minimum, SystemBaseline, VersionNeed

    system = SystemBaseline(
        needs=(
            VersionNeed("libc.so.6", "GLIBC_2.27", ("libonnxruntime.so.1",)),
            VersionNeed("libstdc++.so.6", "GLIBCXX_3.4.22", ("libonnxruntime.so.1",)),
        ),
        glibc=Minimum("2.27", "libc.so.6 GLIBC_2.27"),
        gcc=Minimum("7.1.0", "libstdc++.so.6 GLIBCXX_3.4.22"),
    )
    externals = [external("libc.so.6", "glibc"), external("libstdc++.so.6", "gcc-libs")]
    deb = render_dependencies(externals, "deb", "linux-x86_64", system)
    assert deb.depends == (
        "libc6 (>= 2.27)",
        "libgcc-s1 (>= 7.1.0) | libgcc1 (>= 7.1.0)",
        "libstdc++6 (>= 7.1.0)",
    )
    rpm = render_dependencies(externals, "rpm", "linux-x86_64", system)
    assert rpm.depends == (
        "libc.so.6()(64bit)",
        "libc.so.6(GLIBC_2.27)(64bit)",
        "libstdc++.so.6()(64bit)",
        "libstdc++.so.6(GLIBCXX_3.4.22)(64bit)",
    )


def test_an_unmapped_group_stops_the_build_naming_the_manifest() -> None:
    with pytest.raises(
        ConfigError, match=r"no deb package is known for libfoo.so \(group foo\)"
    ) as e:
        render_dependencies(
            [external("libfoo.so", "foo")], "deb", "linux-x86_64", manifest="manifests/p.toml"
        )
    assert e.value.file == "manifests/p.toml"
    assert '[[externals]]\ngroup = "foo"' in str(e.value.fix)
    assert "deb = { depends" in str(e.value.fix)


@pytest.mark.parametrize("channel", [DebChannel(), RpmChannel()], ids=["deb", "rpm"])
def test_nfpm_yaml_is_data_with_the_stage_and_the_relations(
    channel: Channel, tmp_path: Path
) -> None:
    package = make_package_input(tmp_path)
    output, built = build(channel, package, tmp_path / channel.name)
    config = json.loads((output.directory / "nfpm.yaml").read_text())  # JSON is YAML
    assert config["disable_globbing"] is True
    contents = {c["dst"]: c for c in config["contents"]}
    for shipped in package.files:
        entry = contents[f"{PREFIX}/{shipped.path}"]
        if shipped.link_to:
            assert entry == {"src": shipped.link_to, "dst": entry["dst"], "type": "symlink"}
        else:
            assert entry["file_info"]["mode"] == shipped.mode
            assert (output.directory / entry["src"]).resolve() == (package.stage / shipped.path)
    assert not any(str(tmp_path) in json.dumps(c) for c in config["contents"])  # no host path
    relations = {"deb": "libc6", "rpm": "libc.so.6()(64bit)"}[channel.name]
    assert relations in config["depends"]
    assert (
        built.name
        == {
            "deb": "demo-onnxruntime_1.0.0-1_amd64.deb",
            "rpm": "demo-onnxruntime-1.0.0-1.x86_64.rpm",
        }[channel.name]
    )


HOSTILE = (
    "Evil \"q\" 'q' $(touch pwned) `id` ${HOME} $HOME $$ ${IFS} \\ ; # & | > x\n"
    "Package: evil\n\nDepends: evil\n: key: [a, {b: c}] *anchor &anchor !!python/object ---"
)


@pytest.mark.parametrize("channel", [DebChannel(), RpmChannel()], ids=["deb", "rpm"])
def test_a_hostile_description_is_inert(channel: Channel, tmp_path: Path) -> None:
    need("dpkg-deb", "rpm", packages="dpkg rpm")
    package = replace(make_package_input(tmp_path), description=HOSTILE)
    output, built = build(channel, package, tmp_path / channel.name)
    config = json.loads((output.directory / "nfpm.yaml").read_text())
    assert "${HOME}" not in config["description"].replace("${ORTBUNDLE_NFPM_DOLLAR}", "")
    if channel.name == "deb":
        info = subprocess.run(
            ["dpkg-deb", "-f", str(built)], capture_output=True, text=True, check=True
        ).stdout
        fields = re.findall(r"^(\S+):", info, flags=re.MULTILINE)
        assert "Package: evil" not in info.replace(" Package: evil", "")
        assert (
            fields.count("Depends") == 1 and "evil" not in info.split("Depends:")[1].split("\n")[0]
        )
        description = info.split("Description:", 1)[1]
    else:
        description = subprocess.run(
            ["rpm", "-qp", "--qf", "%{description}", str(built)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    assert " ".join(HOSTILE.split()) in " ".join(description.split())
    assert not (output.directory / "pwned").exists()


def test_the_description_wraps_between_words_and_keeps_a_long_one_whole(tmp_path: Path) -> None:
    """A URL longer than a line is not cut in two (a reader would see a space inside it)."""
    url = "https://example.invalid/" + "very-long-path/" * 6 + "index.html"
    package = replace(make_package_input(tmp_path), description=f"Read {url} first.")
    lines = long_description(package, "deb").splitlines()
    assert f"{url} first." in lines or url in lines, lines
    assert all(len(line) < 80 for line in lines if url not in line), lines
    assert " ".join(lines).startswith(f"Read {url} first. This package installs")


def test_versions_and_names_follow_the_distributions_rules(tmp_path: Path) -> None:
    package = make_package_input(tmp_path)
    output = DebChannel().generate(replace(package, version="1.2.0-rc1"), tmp_path / "deb")
    assert (tmp_path / "deb" / "demo-onnxruntime_1.2.0~rc1-1_amd64.deb") in output.files
    for bad in ("1.2:0", "v1.2", "1.2_0"):
        with pytest.raises(ConfigError, match="cannot be a deb version"):
            DebChannel().generate(replace(package, version=bad), tmp_path / f"deb-{bad}")
    settings = replace(package.settings, package_name="Demo_Runtime")
    with pytest.raises(ConfigError, match="not a valid rpm package name"):
        RpmChannel().generate(replace(package, settings=settings), tmp_path / "rpm")


def test_only_linux_stages_are_packaged(tmp_path: Path) -> None:
    package = make_package_input(tmp_path, "windows-x86_64")
    with pytest.raises(OrtbundleError, match="packages Linux x86_64 or aarch64 stages"):
        DebChannel().generate(package, tmp_path / "deb")


def test_copyright_is_dep5_with_one_paragraph_per_component_and_folded_values(
    tmp_path: Path,
) -> None:
    package = make_loadable_package(tmp_path)
    hostile = replace(
        package.attribution[0],
        copyrights=("Copyright 2020 A", "Files: evil", "", "License: evil"),
        expression="MIT OR Apache-2.0",
    )
    text = copyright_text(replace(package, attribution=(hostile,)), "demo", "/usr/share/doc/demo")
    paragraphs = text.strip("\n").split("\n\n")
    assert paragraphs[0].startswith(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
    )
    files = dict(re.findall(r"^(\S+): (.*)$", paragraphs[1], flags=re.MULTILINE))
    assert files["License"] == "MIT or Apache-2.0"
    assert "usr/lib/demo/runtimes/webgpu/libonnxruntime.so.1.27.0" in files["Files"]
    assert "\n Files: evil\n .\n License: evil\n" in paragraphs[1]
    assert [p.split("\n")[0] for p in paragraphs[2:]] == ["License: Apache-2.0", "License: MIT"]
    # every line is a field or a continuation: nothing a hostile value could start
    for line in text.splitlines():
        assert not line or line.startswith(" ") or re.match(r"[A-Z][A-Za-z-]*: ", line), line


# --- the real tools ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def loadable(tmp_path_factory: pytest.TempPathFactory) -> PackageInput:
    return make_loadable_package(tmp_path_factory.mktemp("loadable"))


@pytest.fixture(scope="module")
def packages(
    loadable: PackageInput, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[ChannelOutput, Path]]:
    out = tmp_path_factory.mktemp("packaging")
    return {c.name: build(c, loadable, out / c.name) for c in (DebChannel(), RpmChannel())}


@pytest.mark.tools
def test_deb_contents_are_the_stage_plus_its_documentation(
    packages: dict[str, tuple[ChannelOutput, Path]], loadable: PackageInput
) -> None:
    need("dpkg-deb", packages="dpkg")
    entries = deb_listing(packages["deb"][1])
    assert {e for e in entries if e[0].startswith(PREFIX)} == stage_listing(loadable.files, PREFIX)
    doc = "/usr/share/doc/demo-onnxruntime"
    assert {e[0] for e in entries if e[0].startswith(doc + "/")} == {
        f"{doc}/{name}"
        for name in (
            "copyright",
            "changelog.Debian.gz",
            "NOTICE",
            "sbom.cdx.json",
            "licenses",
            "licenses/onnxruntime",
            "licenses/onnxruntime/LICENSE",
        )
    }


@pytest.mark.tools
def test_rpm_contents_are_the_stage_plus_license_and_doc_files(
    packages: dict[str, tuple[ChannelOutput, Path]], loadable: PackageInput
) -> None:
    need("rpm", packages="rpm")
    entries, flags = rpm_listing(packages["rpm"][1])
    assert {e for e in entries if e[0].startswith(PREFIX)} == stage_listing(loadable.files, PREFIX)
    licenses = "/usr/share/licenses/demo-onnxruntime"
    assert flags[f"{licenses}/NOTICE"] == "l"
    assert flags[f"{licenses}/licenses/onnxruntime/LICENSE"] == "l"
    assert flags["/usr/share/doc/demo-onnxruntime/sbom.cdx.json"] == "d"


@pytest.mark.tools
def test_lintian_accepts_the_deb(packages: dict[str, tuple[ChannelOutput, Path]]) -> None:
    need("lintian", packages="lintian")
    assert_lintian_accepts(packages["deb"][1])


@pytest.mark.tools
def test_lintian_would_flag_what_the_overrides_cover(
    loadable: PackageInput, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The overrides are what keeps lintian quiet: without them it reports a warning or error."""
    need("lintian", packages="lintian")
    monkeypatch.setattr("ortbundle.channels.deb.LINTIAN_OVERRIDES", ())
    _, deb = build(DebChannel(), loadable, tmp_path / "deb")
    result = lintian(deb)
    assert re.search(r"^[EW]: demo-onnxruntime: ", result.stdout, flags=re.MULTILINE)


CONTACT = "Upstream-Contact: Acme Release Engineering <release@acme.example>"


@pytest.mark.tools
def test_a_project_copyright_template_ships_in_the_deb_and_lintian_accepts_it(
    loadable: PackageInput, tmp_path: Path
) -> None:
    """A project's debian-copyright.j2 (here: one header field more) is what the .deb carries
    as its copyright file, still DEP-5 that lintian reads without a finding."""
    need("lintian", "dpkg-deb", packages="lintian dpkg")
    builtin = (BUILTIN_DIR / "debian-copyright.j2").read_text("utf-8")
    source = "Source: {{ source | dep5 }}\n"
    assert source in builtin
    (tmp_path / "project/templates").mkdir(parents=True)
    (tmp_path / "project/templates/debian-copyright.j2").write_text(
        builtin.replace(source, source + CONTACT + "\n"), "utf-8"
    )
    package = replace(loadable, templates=find_overrides(tmp_path / "project", ["templates"]))
    _, deb = build(DebChannel(), package, tmp_path / "deb")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path / "root")], check=True)
    shipped = (tmp_path / "root/usr/share/doc/demo-onnxruntime/copyright").read_text("utf-8")
    header = shipped.split("\n\n", 1)[0].splitlines()
    assert header[0].startswith("Format: ")
    assert header[3] == CONTACT
    assert shipped.replace(CONTACT + "\n", "") == copyright_text(
        loadable, "demo-onnxruntime", "/usr/share/doc/demo-onnxruntime"
    )
    assert_lintian_accepts(deb)


@pytest.mark.tools
def test_rpmlint_finds_no_error(packages: dict[str, tuple[ChannelOutput, Path]]) -> None:
    need("rpmlint", packages="rpmlint")
    output, rpm = packages["rpm"]
    (rpmlintrc,) = output.directory.glob("*.rpmlintrc")
    result = subprocess.run(
        ["rpmlint", "-r", str(rpmlintrc), str(rpm)], capture_output=True, text=True, check=False
    )
    assert " 0 errors," in result.stdout, result.stdout + result.stderr
    assert not re.search(r": E: ", result.stdout), result.stdout


@pytest.mark.tools
def test_the_deb_installs_and_its_loader_opens_each_runtime(
    packages: dict[str, tuple[ChannelOutput, Path]], tmp_path: Path
) -> None:
    need("dpkg-deb", packages="dpkg")
    subprocess.run(["dpkg-deb", "-x", str(packages["deb"][1]), str(tmp_path)], check=True)
    open_each_runtime(tmp_path / PREFIX.lstrip("/"), OVERRIDE_ENV, RUNTIMES)


@pytest.mark.tools
def test_the_rpm_installs_into_a_scratch_root_and_its_loader_opens_each_runtime(
    packages: dict[str, tuple[ChannelOutput, Path]], tmp_path: Path
) -> None:
    need("rpm", packages="rpm")
    if os.geteuid() != 0:
        pytest.skip("rpm --root chroots, which needs root")
    root = tmp_path / "root"
    subprocess.run(["rpm", "--root", str(root), "--initdb"], check=True)
    installed = subprocess.run(
        ["rpm", "--root", str(root), "-i", "--nodeps", str(packages["rpm"][1])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    verified = subprocess.run(
        ["rpm", "--root", str(root), "-V", "--nodeps", "demo-onnxruntime"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr  # every file as packed
    open_each_runtime(root / PREFIX.lstrip("/"), OVERRIDE_ENV, RUNTIMES)


@pytest.mark.parametrize("channel", [DebChannel(), RpmChannel()], ids=["deb", "rpm"])
def test_two_builds_give_identical_bytes(
    channel: Channel, loadable: PackageInput, tmp_path: Path
) -> None:
    _, first = build(channel, loadable, tmp_path / "one")
    _, second = build(channel, loadable, tmp_path / "two")
    assert first.read_bytes() == second.read_bytes()
    assert (tmp_path / "one" / "nfpm.yaml").read_bytes() == (
        tmp_path / "two" / "nfpm.yaml"
    ).read_bytes()


def test_a_stage_changed_after_the_build_is_not_packaged(tmp_path: Path) -> None:
    package = make_package_input(tmp_path)
    changed = next(f for f in package.files if f.link_to is None and f.path.endswith(".so.2025"))
    (package.stage / changed.path).write_bytes(b"tampered")
    with pytest.raises(OrtbundleError, match="changed or vanished"):
        RpmChannel().generate(package, tmp_path / "rpm")
    assert not list((tmp_path / "rpm").glob("*.rpm"))


def test_symlinks_out_of_the_stage_are_refused(tmp_path: Path) -> None:
    package = make_package_input(tmp_path)
    evil = ShippedFile("runtimes/evil.so", 1, "0" * 64, 0o777, link_to="../../etc/passwd")
    package = replace(package, files=(*package.files, evil))
    with pytest.raises(OrtbundleError, match="links outside the stage"):
        DebChannel().generate(package, tmp_path / "deb")


@pytest.mark.tools
def test_rpmlint_filters_exactly_what_fires_when_two_texts_are_identical(
    loadable: PackageInput, tmp_path: Path
) -> None:
    """rpmlint errs on an unused filter: the duplicate filter appears only when it is needed."""
    need("rpmlint", packages="rpmlint")
    stage = tmp_path / "linux-x86_64"
    shutil.copytree(loadable.stage, stage, symlinks=True)
    twin = next(f for f in loadable.files if f.path == "licenses/onnxruntime/LICENSE")
    shutil.copy(stage / twin.path, stage / "licenses/onnxruntime/LICENSE-copy")
    copy = replace(twin, path="licenses/onnxruntime/LICENSE-copy")
    package = replace(
        loadable, stage=stage, files=tuple(sorted((*loadable.files, copy), key=lambda f: f.path))
    )
    for candidate, duplicated in ((loadable, False), (package, True)):
        output, rpm = build(RpmChannel(), candidate, tmp_path / f"rpm-{duplicated}")
        (rpmlintrc,) = output.directory.glob("*.rpmlintrc")
        assert ("files-duplicate" in rpmlintrc.read_text()) is duplicated
        result = subprocess.run(
            ["rpmlint", "-r", str(rpmlintrc), str(rpm)], capture_output=True, text=True, check=False
        )
        assert " 0 errors," in result.stdout, result.stdout


# --- Linux on Arm: the same packages, named and checked for arm64 / aarch64 ------------------


@pytest.fixture(scope="module")
def arm_packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[ChannelOutput, Path]]:
    root = tmp_path_factory.mktemp("arm")
    package = make_loadable_package(root / "in", "linux-aarch64")  # aarch64-linux-gnu-gcc's
    return {c.name: build(c, package, root / c.name) for c in (DebChannel(), RpmChannel())}


def test_the_aarch64_packages_are_named_for_arm64_and_aarch64(
    arm_packages: dict[str, tuple[ChannelOutput, Path]],
) -> None:
    assert arm_packages["deb"][1].name == "demo-onnxruntime_1.0.0-1_arm64.deb"
    assert arm_packages["rpm"][1].name == "demo-onnxruntime-1.0.0-1.aarch64.rpm"


@pytest.mark.tools
def test_the_arm64_deb_says_arm64_and_lintian_accepts_it(
    arm_packages: dict[str, tuple[ChannelOutput, Path]],
) -> None:
    """lintian holds the libraries' machine against the Architecture field
    (binary-from-other-architecture): an arm64 .deb of x86-64 code, or the reverse, is an error."""
    need("lintian", "dpkg-deb", packages="lintian dpkg")
    deb = arm_packages["deb"][1]
    field = subprocess.run(
        ["dpkg-deb", "-f", str(deb), "Architecture"], capture_output=True, text=True, check=True
    )
    assert field.stdout.strip() == "arm64"
    assert_lintian_accepts(deb)


@pytest.mark.tools
def test_the_aarch64_rpm_says_aarch64_and_rpmlint_finds_no_error(
    arm_packages: dict[str, tuple[ChannelOutput, Path]],
) -> None:
    need("rpmlint", "rpm", packages="rpmlint rpm")
    output, rpm = arm_packages["rpm"]
    arch = subprocess.run(
        ["rpm", "-qp", "--qf", "%{ARCH}", str(rpm)], capture_output=True, text=True, check=True
    )
    assert arch.stdout == "aarch64"
    (rpmlintrc,) = output.directory.glob("*.rpmlintrc")
    result = subprocess.run(
        ["rpmlint", "-r", str(rpmlintrc), str(rpm)], capture_output=True, text=True, check=False
    )
    assert " 0 errors," in result.stdout, result.stdout + result.stderr
    assert not re.search(r": E: ", result.stdout), result.stdout


def test_each_further_target_is_packaged_in_a_directory_named_by_it(tmp_path: Path) -> None:
    """The first target's package stays in packaging/deb/, linux-aarch64's goes to
    packaging/deb/linux-aarch64/ — the same path when a runner builds only that target — and
    the build's digests name each by its path under the channel's directory."""
    inputs = {t: make_package_input(tmp_path / "in", t) for t in ("linux-x86_64", "linux-aarch64")}
    (both,) = generate_all(["deb"], inputs, tmp_path / "packaging", 1)
    assert both.directory == tmp_path / "packaging" / "deb"
    assert set(both.digests) == {
        "demo-onnxruntime_1.0.0-1_amd64.deb",
        "linux-aarch64/demo-onnxruntime_1.0.0-1_arm64.deb",
    }
    for name, digest in both.digests.items():
        assert hashlib.sha256((both.directory / name).read_bytes()).hexdigest() == digest
    alone = {"linux-aarch64": inputs["linux-aarch64"]}
    (only,) = generate_all(["deb"], alone, tmp_path / "runner", 1)
    assert set(only.digests) == {"linux-aarch64/demo-onnxruntime_1.0.0-1_arm64.deb"}
    assert not any(only.directory.glob("*.deb"))


@pytest.mark.tools
@pytest.mark.parametrize("stripped", [False, True])
def test_rpmlint_filters_unstripped_libraries_only_when_one_is_shipped(
    tmp_path: Path, stripped: bool
) -> None:
    """The aarch64 wheels' libraries are stripped, the x86-64 ones are not; rpmlint errs on an
    unused filter, so unstripped-binary-or-object is filtered only when it would fire."""
    need("rpmlint", "aarch64-linux-gnu-strip", packages="rpmlint binutils-aarch64-linux-gnu")
    package = make_loadable_package(tmp_path / "in", "linux-aarch64")
    if stripped:
        files = []
        for shipped in package.files:
            path = package.stage / shipped.path
            if shipped.link_to is None and ".so" in shipped.path:
                subprocess.run(["aarch64-linux-gnu-strip", str(path)], check=True)
                data = path.read_bytes()
                shipped = replace(shipped, size=len(data), sha256=hashlib.sha256(data).hexdigest())
            files.append(shipped)
        package = replace(package, files=tuple(files))
    output, rpm = build(RpmChannel(), package, tmp_path / "rpm")
    (rpmlintrc,) = output.directory.glob("*.rpmlintrc")
    assert ("unstripped-binary-or-object" in rpmlintrc.read_text()) is not stripped
    result = subprocess.run(
        ["rpmlint", "-r", str(rpmlintrc), str(rpm)], capture_output=True, text=True, check=False
    )
    assert " 0 errors," in result.stdout, result.stdout + result.stderr
