"""One requirement truth (#30): every output of a build says what the requirements model says.

The synthetic product is the issue's: a Windows runtime whose DirectML.dll imports d3d12.dll
(Windows 10 only) while its headers say Windows 8.1, and a plugin EP that needs the NVIDIA
driver's library (nvml.dll, libnvidia-ml.so.1) through a group the product declares required.
A plugin EP is an accelerator its runtime works without, so the driver is optional; d3d12.dll
makes it Windows 10. The "promise" variant drops d3d12.dll and says `[system] windows = "10.0"`,
`glibc = "2.28"` instead, which every output must say too. The "opened" variant's DirectML.dll
opens d3d12.dll only by name (LoadLibraryExW; the recipe's `loads` declares it), the "apiset"
one imports a Windows 10 API set (api-ms-win-core-heap-l2-1-0) instead (#43). Each test reads one output and holds
it against the model (`TargetResult.requirements`) and the facts; the last compares them all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ortbundle._core.progress import plain_reporter
from ortbundle.channels.nsis import nsis_string
from ortbundle.evidence.names import REPORT_NAME, SBOM_NAME, SUMMARY_NAME
from ortbundle.pipeline.build import build
from ortbundle.pipeline.result import BuildResult, TargetResult
from ortbundle.pipeline.summary import summary_lines
from ortbundle.stage.requirements import TargetRequirements
from tests.helpers.elf import make_elf
from tests.helpers.index_server import IndexServer
from tests.helpers.pe import make_pe
from tests.helpers.project import PLUGIN_EXPORTS, FakeProject
from tests.helpers.toml_edit import edit_toml
from tests.helpers.wheels import make_wheel, sha256_of
from tests.test_report import elements

LINUX, WINDOWS = "linux-x86_64", "windows-x86_64"
DRIVER_DLL, DRIVER_SO = "nvml.dll", "libnvidia-ml.so.1"
PLUGIN = "ep-nv"
EP_NAME = "NvTensorRTRTXExecutionProvider"  # what the plugin registers, in its strings
INSTALL = "Install the NVIDIA display driver 580 or newer"
PLUGIN_WHEELS = {
    LINUX: "onnxruntime_ep_nv-0.5.0-py3-none-manylinux_2_28_x86_64.whl",
    WINDOWS: "onnxruntime_ep_nv-0.5.0-py3-none-win_amd64.whl",
}

# the product's own group: required as declared (a CUDA runtime could not work without it)
DRIVER_GROUP = f"""
[[externals]]
group = "nvidia-driver"
kind = "driver"
names = ["{DRIVER_DLL}", "{DRIVER_SO}"]
version = ">=580"
install = "{INSTALL}"
sandbox = false
arch = {{ depends = ["nvidia-utils"] }}
deb = {{ depends = ["libnvidia-ml1"] }}
rpm = {{ depends = ["nvidia-driver-libs"] }}

[plugin.{PLUGIN}]
pairs_with = ["fake"]
"""
PROMISE = '\n[system]\nwindows = "10.0"\nglibc = "2.28"\n'


HEAP_L2 = "api-ms-win-core-heap-l2-1-0.dll"
WHY = {
    "d3d12": "runtimes/fake/DirectML.dll imports d3d12.dll",
    "opened": "runtimes/fake/DirectML.dll opens d3d12.dll by name",
    "apiset": f"runtimes/fake/DirectML.dll imports the API set {HEAP_L2} (",
    "promise": 'the product\'s [system] windows = "10.0"',
}


def _directml(variant: str) -> bytes:
    """DirectML.dll: Windows 8.1 by its header and by CreateDXGIFactory2; d3d12.dll (imported,
    or opened by name) or a Windows 10 API set makes it 10."""
    imported = {"d3d12": ("d3d12.dll",), "apiset": (HEAP_L2,)}.get(variant, ())
    return make_pe(
        imports=("KERNEL32.dll", "dxgi.dll", *imported),
        functions={
            "dxgi.dll": ["CreateDXGIFactory2"],
            **({"KERNEL32.dll": ["LoadLibraryExW"]} if variant == "opened" else {}),
        },
        wide=("d3d12.dll",) if variant == "opened" else (),
        os_version=(6, 3),
        subsystem_version=(6, 3),
    )


def _add_plugin(fake: FakeProject) -> None:
    """NVIDIA's plugin EP in miniature: one provider library per OS needing the driver's."""
    licence = b"MIT License\n\nCopyright (c) NVIDIA\n"
    members = {
        LINUX: {
            "ep_nv/libonnxruntime_providers_nv.so": make_elf(
                needed=(DRIVER_SO, "libc.so.6"), exports=PLUGIN_EXPORTS, rodata=(EP_NAME,)
            ),
            "ep_nv/LICENSE": licence,
        },
        WINDOWS: {
            "ep_nv/onnxruntime_providers_nv.dll": make_pe(
                imports=("KERNEL32.dll", DRIVER_DLL), exports=PLUGIN_EXPORTS, rodata=(EP_NAME,)
            ),
            "ep_nv/LICENSE": licence,
        },
    }
    wheels = {
        t: make_wheel(
            fake.root / "plugin-wheels" / PLUGIN_WHEELS[t], "onnxruntime-ep-nv", "0.5.0", m
        )
        for t, m in members.items()
    }
    for wheel in wheels.values():
        fake.server.add("onnxruntime-ep-nv", wheel)
    sections = []
    for target, source, entry in (
        (LINUX, "linux", "libonnxruntime_providers_nv.so"),
        (WINDOWS, "windows", "onnxruntime_providers_nv.dll"),
    ):
        sections.append(f"""
[sources.{source}]
pypi = {{ project = "onnxruntime-ep-nv", version = "0.5.0", filename = "{PLUGIN_WHEELS[target]}" }}
sha256 = "{sha256_of(wheels[target])}"

[targets.{target}]
entry = "{entry}"
roots = ["{entry}"]

[[targets.{target}.take]]
source = "{source}"
libraries = ["ep_nv/*.{entry.rsplit(".", 1)[1]}"]

[[targets.{target}.licenses]]
component = "{PLUGIN}"
version = "0.5.0"
expression = "MIT"
files = ["*"]
texts = [{{ source = "{source}", member = "ep_nv/LICENSE" }}]
""")
    (fake.root / "recipes" / f"{PLUGIN}.toml").write_text(
        f"""
[component]
name = "{PLUGIN}"
kind = "plugin-ep"
version = "0.5.0"
label = "NVIDIA TensorRT RTX"
description = "A synthetic NVIDIA plugin execution provider"
providers = ["NvTensorRTRTXExecutionProvider"]
ep_name = "NvTensorRTRTXExecutionProvider"
min_core = "1.0.0"
"""
        + "".join(sections)
    )


@dataclass(frozen=True)
class Built:
    variant: str  # what says Windows 10: "d3d12", "opened", "apiset" (the DLL), "promise"
    result: BuildResult

    @property
    def version_dir(self) -> Path:
        return self.result.version_dir

    def target(self, name: str) -> TargetResult:
        return next(t for t in self.result.targets if t.target == name)

    def model(self, name: str) -> TargetRequirements:
        return self.target(name).requirements

    def read(self, path: str) -> str:
        return (self.version_dir / path).read_text("utf-8")


@pytest.fixture(scope="module", params=["d3d12", "promise", "opened", "apiset"])
def built(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Built]:
    variant: str = request.param
    with IndexServer().running() as server:
        fake = FakeProject(root=tmp_path_factory.mktemp(variant) / "project", server=server)
        fake.windows["onnxruntime/capi/DirectML.dll"] = _directml(variant)
        fake.windows_roots = ["onnxruntime.dll", "DirectML.dll"]
        fake.product_extra = DRIVER_GROUP + (PROMISE if variant == "promise" else "")
        fake.write()
        if variant == "opened":
            edit_toml(fake.root / "recipes" / "fake.toml", _declare_d3d12)
        _add_plugin(fake)
        yield Built(variant, build(fake.project, fake.options(), plain_reporter()))


def _declare_d3d12(recipe: Any) -> None:
    recipe["targets"][WINDOWS]["loads"] = ["d3d12.dll"]


# --- what each output says: (the driver's group optional?, the oldest Windows or glibc) ---------


def _driver(model: TargetRequirements) -> bool:
    return next(g.optional for g in model.groups if g.group == "nvidia-driver")


@pytest.mark.slow
def test_the_model_says_the_driver_is_optional_and_windows_10(built: Built) -> None:
    for target in (LINUX, WINDOWS):
        model = built.model(target)
        assert _driver(model) is True  # only the plugin EP needs it
        assert model.runtime(PLUGIN).plugin and model.runtime(PLUGIN).pairs_with == ("fake",)
    windows = built.model(WINDOWS).system.windows
    assert windows is not None and windows.version == "10.0"
    assert windows.why.startswith(WHY[built.variant]), windows.why
    if built.variant == "promise":
        glibc = built.model(LINUX).system.glibc
        assert glibc is not None and glibc.version == "2.28"


def summary_says(built: Built, target: str) -> tuple[bool, str]:
    document = json.loads(built.read(SUMMARY_NAME))
    entry = next(t for t in document["targets"] if t["target"] == target)
    group = next(g for g in entry["requires"] if g["group"] == "nvidia-driver")
    return group["optional"], entry["runs_on"]


def test_the_summary_renders_the_model(built: Built) -> None:
    document = json.loads(built.read(SUMMARY_NAME))
    for target in (LINUX, WINDOWS):
        model = built.model(target)
        entry = next(t for t in document["targets"] if t["target"] == target)
        assert [(g["group"], g["optional"], g["names"]) for g in entry["requires"]] == [
            (g.group, g.optional, list(g.names)) for g in model.groups
        ]
        assert entry["runs_on"] == model.runs_on and entry["warnings"] == list(model.warnings)
        assert summary_says(built, target)[0] is True
    assert summary_says(built, WINDOWS)[1].startswith("Windows 10 (10.0)")
    printed = "\n".join(summary_lines(document))
    assert (
        "optional nvidia-driver >=580" in printed
        and f"optional nvidia-driver: {INSTALL}" in printed
    )
    assert "required nvidia-driver" not in printed and "runs on Windows 10" in printed
    assert "Windows 8.1" not in printed


def index_says(built: Built, target: str) -> tuple[bool, dict[str, Any]]:
    index = json.loads(built.read(f"{target}/runtimes.json"))
    (runtime,) = index["runtimes"]
    driver = next(r for r in runtime["requires"] if r["group"] == "nvidia-driver")
    return driver["optional"], runtime["system"]


def test_runtimes_json_renders_the_model(built: Built) -> None:
    for target in (LINUX, WINDOWS):
        model = built.model(target)
        index = json.loads(built.read(f"{target}/runtimes.json"))
        (runtime,) = index["runtimes"]
        assert runtime["system"] == model.runtime("fake").system.as_json()
        assert [(r["name"], r["optional"], r.get("version", "")) for r in runtime["requires"]] == [
            (e.name, e.optional, e.version)
            for e in model.index_requires("fake")
            if e.group not in ("glibc", "gcc-libs", "windows")
        ]
        optional, _ = index_says(built, target)
        assert optional is True
    assert index_says(built, WINDOWS)[1]["windows"] == "10.0"
    if built.variant == "promise":
        assert index_says(built, LINUX)[1]["glibc"] == "2.28"


def installer_says(built: Built) -> tuple[bool, str]:
    script = built.read("packaging/nsis/installer.nsi")
    optional = [line for line in script.splitlines() if "StrCpy $MissingOptional" in line]
    required = [line for line in script.splitlines() if "StrCpy $MissingRequired" in line]
    in_optional = any(DRIVER_DLL in line for line in optional)
    in_required = any(DRIVER_DLL in line for line in required)
    assert in_optional != in_required, "the driver is named once, required or optional"
    test = re.search(r"\$\{IfNot\} \$\{AtLeastWin([0-9.]+)\}", script)
    return in_optional, test.group(1) if test else ""


def test_the_installer_renders_the_model(built: Built) -> None:
    model = built.model(WINDOWS)
    assert installer_says(built) == (True, "10")
    script = built.read("packaging/nsis/installer.nsi")
    why = model.system.windows.why  # type: ignore[union-attr]
    assert nsis_string(f"fakeproduct 1.2.3 needs Windows 10 or newer ({why}).") in script
    assert f"{DRIVER_DLL} (>=580) — {INSTALL} (without it, NVIDIA TensorRT RTX loses" in script
    nsis = next(p for p in built.result.packages if p.channel == "nsis")
    assert f"runs on {model.system.describe()}" in nsis.notes
    assert any(f"the installer mentions the optional {DRIVER_DLL}" in n for n in nsis.notes)


def _array(pkgbuild: str, name: str) -> list[str]:
    found = re.search(rf"^{name}=\((.*?)\)$", pkgbuild, re.MULTILINE | re.DOTALL)
    return re.findall(r"'([^']*)'", found.group(1)) if found else []


def arch_says(built: Built) -> tuple[bool, str]:
    """(the driver an optdepends, not a depends; the glibc depends' version) from the PKGBUILD,
    which .SRCINFO must say alike."""
    pkgbuild = built.read("packaging/arch/PKGBUILD")
    srcinfo = built.read("packaging/arch/.SRCINFO")
    depends, optdepends = _array(pkgbuild, "depends"), _array(pkgbuild, "optdepends")
    assert re.findall(r"^\tdepends = (.*)$", srcinfo, re.M) == depends
    assert re.findall(r"^\toptdepends = (.*)$", srcinfo, re.M) == optdepends
    optional = any(d.startswith("nvidia-utils>=580: ") for d in optdepends)
    assert optional != any(d.startswith("nvidia-utils") for d in depends)
    glibc = next((d.removeprefix("glibc>=") for d in depends if d.startswith("glibc>=")), "")
    return optional, glibc


def test_the_arch_package_renders_the_model(built: Built) -> None:
    optional, glibc = arch_says(built)
    assert optional is True
    system = built.model(LINUX).system
    assert glibc == (system.glibc.version if system.glibc else "")
    if built.variant == "promise":
        assert glibc == "2.28"
        assert "depends = glibc>=2.28" in built.read("packaging/arch/.SRCINFO")
    arch = next(p for p in built.result.packages if p.channel == "arch")
    if system.glibc:
        assert f"runs on {system.describe()}" in arch.notes


def linux_packages_say(built: Built, packager: str) -> tuple[bool, str]:
    config = json.loads(built.read(f"packaging/{packager}/nfpm.yaml"))
    name = {"deb": "libnvidia-ml1 (>= 580)", "rpm": "nvidia-driver-libs >= 580"}[packager]
    optional = name in config.get("recommends", [])
    assert optional != any("nvidia" in d for d in config.get("depends", []))
    glibc = next(
        (m.group(1) for d in config.get("depends", []) if (m := re.match(r"libc6 \(>= (.*)\)", d))),
        "",
    )
    return optional, glibc


def test_deb_and_rpm_render_the_model(built: Built) -> None:
    system = built.model(LINUX).system
    deb_optional, deb_glibc = linux_packages_say(built, "deb")
    rpm_optional, _ = linux_packages_say(built, "rpm")
    assert deb_optional is rpm_optional is True
    assert deb_glibc == (system.glibc.version if system.glibc else "")
    if built.variant == "promise":
        assert deb_glibc == "2.28"
    # the SBOM each package carries is the target's, rendered from the same model
    sbom = json.loads(built.read("packaging/deb/generated/sbom.cdx.json"))
    props = {(p["name"], p["value"]) for p in sbom["metadata"]["component"]["properties"]}
    assert (
        "ortbundle:runs-on",
        f"{LINUX} {built.model(LINUX).runs_on or 'no versioned system requirement'}",
    ) in props
    assert (
        "ortbundle:requires-library",
        f"{LINUX} {DRIVER_SO} nvidia-driver optional >=580",
    ) in props


def flatpak_says(built: Built) -> bool:
    """The Flatpak refuses a runtime needing a host-only library it requires (the build would
    stop); an optional one is a note that the rung will not work in the sandbox."""
    flatpak = next(p for p in built.result.packages if p.channel == "flatpak")
    return any(
        f"the NVIDIA TensorRT RTX rung that uses {DRIVER_SO}" in n and "will not work" in n
        for n in flatpak.notes
    )


def test_the_flatpak_renders_the_model(built: Built) -> None:
    host_only = [e for e in built.model(LINUX).externals if not e.sandbox]
    assert [(e.name, e.optional) for e in host_only] == [(DRIVER_SO, True)]
    assert flatpak_says(built) is True
    # the module installs the stage's runtimes.json: the driver optional there too
    assert (built.version_dir / "packaging/flatpak/fakeproduct-onnxruntime.module.json").is_file()
    assert index_says(built, LINUX)[0] is True


def sbom_says(built: Built, target: str) -> tuple[bool, str]:
    sbom = json.loads(built.read(SBOM_NAME))
    props = {(p["name"], p["value"]) for p in sbom["metadata"]["component"]["properties"]}
    name = DRIVER_DLL if target == WINDOWS else DRIVER_SO
    optional = (
        "ortbundle:requires-library",
        f"{target} {name} nvidia-driver optional >=580",
    ) in props
    assert optional != any(
        v.startswith(f"{target} {name} nvidia-driver required") for _, v in props
    )
    runs_on = next(v for n, v in props if n == "ortbundle:runs-on" and v.startswith(f"{target} "))
    return optional, runs_on.removeprefix(f"{target} ")


def test_the_sbom_renders_the_model(built: Built) -> None:
    sbom = json.loads(built.read(SBOM_NAME))
    for target in (LINUX, WINDOWS):
        model = built.model(target)
        optional, runs_on = sbom_says(built, target)
        assert optional is True
        assert runs_on == (model.runs_on or "no versioned system requirement")
    assert sbom_says(built, WINDOWS)[1].startswith("Windows 10 (10.0)")
    by_name = {c["name"]: c for c in sbom["components"]}
    fake = {(p["name"], p["value"]) for p in by_name["fake"]["properties"]}
    assert any(
        n == "ortbundle:requires-system" and v.startswith(f"{WINDOWS} ") and "windows 10.0" in v
        for n, v in fake
    )
    plugin = {(p["name"], p["value"]) for p in by_name[PLUGIN]["properties"]}
    assert (
        "ortbundle:requires-library",
        f"{WINDOWS} {DRIVER_DLL} nvidia-driver optional >=580",
    ) in plugin


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def report_says(built: Built, target: str) -> tuple[bool, str]:
    html = built.read(REPORT_NAME)
    section = _between(html, f'<div class="requirements" data-target="{target}">', "</div>")
    row = _between(section, 'data-group="nvidia-driver"', "</tr>")
    optional = "badge optional" in row
    assert optional != ("badge required" in row)
    runs_on = re.search(r'<p class="runs-on">Runs on (.*?)\.</p>', section)
    return optional, runs_on.group(1) if runs_on else ""


def test_the_report_renders_the_model(built: Built) -> None:
    html = built.read(REPORT_NAME)
    for target in (LINUX, WINDOWS):
        model = built.model(target)
        optional, runs_on = report_says(built, target)
        assert optional is True
        assert runs_on == (model.runs_on or "any system of the target")
        # the plugin EP's own closure says optional too
        closure = html.split(f'data-target="{target}" data-runtime="{PLUGIN}"', 1)[1]
        row = _between(closure, 'data-group="nvidia-driver"', "</tr>")
        assert "badge optional" in row and "badge required" not in row
        assert elements(html).text  # the page parses
    assert report_says(built, WINDOWS)[1].startswith("Windows 10 (10.0)")


def _nt(described: str) -> str:
    """'Windows 10 (10.0), Visual C++ runtime ≥ 14.0' -> '10.0'."""
    found = re.search(r"Windows [^(),]* \(([0-9.]+)\)", described)
    return found.group(1) if found else ""


def _glibc(described: str) -> str:
    """'glibc ≥ 2.28 (manylinux_2_28), …' -> '2.28'."""
    found = re.search(r"glibc ≥ ([0-9.]+)", described)
    return found.group(1) if found else ""


def test_every_output_says_the_same(built: Built) -> None:
    """The comparison the issue asked for: the driver optional in every output alike, and the
    oldest system the same wherever an output states it (Windows 10 on Windows; on Linux the
    glibc minimum, the promise's 2.28 in the promise variant). rpm states glibc only by the
    symbol versions the binaries need (a capability glibc defines), the Flatpak not at all."""
    windows, linux = built.model(WINDOWS), built.model(LINUX)
    driver = {
        "model": _driver(windows) and _driver(linux),
        "summary": summary_says(built, WINDOWS)[0] and summary_says(built, LINUX)[0],
        "runtimes.json": index_says(built, WINDOWS)[0] and index_says(built, LINUX)[0],
        "installer": installer_says(built)[0],
        "PKGBUILD/.SRCINFO": arch_says(built)[0],
        "deb": linux_packages_say(built, "deb")[0],
        "rpm": linux_packages_say(built, "rpm")[0],
        "flatpak": flatpak_says(built),
        "sbom": sbom_says(built, WINDOWS)[0] and sbom_says(built, LINUX)[0],
        "report": report_says(built, WINDOWS)[0] and report_says(built, LINUX)[0],
    }
    assert set(driver.values()) == {True}, driver
    oldest_windows = {
        "model": _nt(windows.runs_on),
        "summary": _nt(summary_says(built, WINDOWS)[1]),
        "runtimes.json": index_says(built, WINDOWS)[1]["windows"],
        "installer": {"10": "10.0"}.get(installer_says(built)[1], installer_says(built)[1]),
        "sbom": _nt(sbom_says(built, WINDOWS)[1]),
        "report": _nt(report_says(built, WINDOWS)[1]),
    }
    assert set(oldest_windows.values()) == {"10.0"}, oldest_windows
    oldest_glibc = {
        "model": linux.system.glibc.version if linux.system.glibc else "",
        "summary": _glibc(summary_says(built, LINUX)[1]),
        "runtimes.json": index_says(built, LINUX)[1].get("glibc", ""),
        "PKGBUILD/.SRCINFO": arch_says(built)[1],
        "deb": linux_packages_say(built, "deb")[1],
        "sbom": _glibc(sbom_says(built, LINUX)[1]),
        "report": _glibc(report_says(built, LINUX)[1]),
    }
    assert len(set(oldest_glibc.values())) == 1, oldest_glibc
    if built.variant == "promise":
        assert oldest_glibc["model"] == "2.28"
