"""Every product in manifests/, built offline from synthetic inputs: every output renders the
requirements model of every target alike.

tests/helpers/synthetic_products.py replaces each pinned upstream artifact with an archive of
the same kind built by code (the members the recipes name; each library needing the product's
own external groups) and puts it in a fresh download cache; the copied recipes are re-pinned
to it. Each product is then built `--offline` with every channel it lists, and for each target
the summary, runtimes.json (or an add-on's fragment), the closure record, the installer, the
Arch, deb and rpm relations, the Flatpak's sandbox verdict, the SBOM and report.html are held
against the model the build resolved (`TargetResult.requirements`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle._core.progress import plain_reporter
from ortbundle.evidence.names import REPORT_NAME, SBOM_NAME, SUMMARY_NAME
from ortbundle.pipeline.build import BuildOptions, Project, build
from ortbundle.pipeline.result import BuildResult, TargetResult
from ortbundle.pipeline.summary import summary_lines
from ortbundle.stage.index_json import index_files
from ortbundle.stage.requirements import TargetRequirements
from tests.helpers.synthetic_products import REPO, synthesize

PRODUCTS = sorted(p.stem for p in (REPO / "manifests").glob("*.toml"))
CHECKED_KINDS = ("redist", "toolkit", "driver")  # what the installer looks for
WINVER = {"6.0": "Vista", "6.1": "7", "6.2": "8", "6.3": "8.1", "10.0": "10"}


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("synthetic")
    synthesize(root / "project", root / "cache")
    yield root


def _build(root: Path, product: str) -> BuildResult:
    options = BuildOptions(
        product=product,
        offline=True,  # every input is in the synthetic cache: no network at all
        cache_dir=root / "cache",
        environ={"HOME": str(root / "home"), "SOURCE_DATE_EPOCH": "1700000000"},
    )
    return build(Project.at(root / "project", root / "dist" / product), options, plain_reporter())


@pytest.mark.slow
@pytest.mark.parametrize("product", PRODUCTS)
def test_every_product_builds_offline_and_every_output_renders_its_model(
    synthetic: Path, product: str
) -> None:
    result = _build(synthetic, product)
    assert {t.target for t in result.targets} == set(result.plan.targets)
    for target in result.targets:
        model = target.requirements
        assert model.runtimes, f"{product} {target.target}: no runtime"
        _summary(result, target.target, model)
        _index(result, target, model)
        _closures(result, model)
        _sbom(result, model)
        _report(result, model)
        for package in result.packages:
            if package.channel == "nsis" and target.target == "windows-x86_64":
                _installer(result, model)
            if package.channel == "arch" and target.target == "linux-x86_64":
                _arch(result, package.notes, model)
            if package.channel in ("deb", "rpm") and target.target == "linux-x86_64":
                _linux_package(package.channel, package.notes, model)
            if package.channel == "flatpak" and target.target == "linux-x86_64":
                _flatpak(result, package.notes, model)
    if product == "darkroom":
        _floors(result)


def _floors(result: BuildResult) -> None:
    """The default product's oldest systems (#43), which the per-output checks above hold every
    output to: Windows on Arm64 and the WebGPU runtime need Windows 10 (its recipe's loads open
    d3d12.dll), OpenVINO keeps its own evidence's floor (DXCore is an optional load); macOS is
    the dylib's minos, in the console summary as well."""
    models = {t.target: t.requirements for t in result.targets}
    assert models["windows-arm64"].runs_on.startswith("Windows 10 (10.0)")
    x64 = models["windows-x86_64"]
    webgpu, openvino = x64.runtime("webgpu").system.windows, x64.runtime("openvino").system.windows
    assert webgpu is not None and webgpu.version == "10.0", webgpu
    assert openvino is not None and "dxcore" not in openvino.why.lower(), openvino
    assert x64.system.windows == replace(webgpu, why=f"runtimes/webgpu/{webgpu.why}")
    assert models["macos-arm64"].runs_on == "macOS ≥ 14.0"
    document = json.loads((result.version_dir / SUMMARY_NAME).read_text("utf-8"))
    printed = summary_lines(document)
    at = next(i for i, line in enumerate(printed) if "macos-arm64" in line)
    assert any("runs on macOS ≥ 14.0" in line for line in printed[at : at + 4]), printed


def _optional(model: TargetRequirements) -> dict[str, bool]:
    return {e.name: e.optional for e in model.externals}


def _summary(result: BuildResult, target: str, model: TargetRequirements) -> None:
    document = json.loads((result.version_dir / SUMMARY_NAME).read_text("utf-8"))
    entry = next(t for t in document["targets"] if t["target"] == target)
    assert [(g["group"], g["optional"], g["names"], g["version"]) for g in entry["requires"]] == [
        (g.group, g.optional, list(g.names), g.version) for g in model.groups
    ]
    assert entry["runs_on"] == model.runs_on and entry["warnings"] == list(model.warnings)


def _index(result: BuildResult, target: TargetResult, model: TargetRequirements) -> None:
    """runtimes.json (an add-on's fragment): each runtime's system and requirements."""
    (index_name, *_) = index_files(result.plan.product)
    index = json.loads((result.version_dir / target.target / index_name).read_text("utf-8"))
    for runtime in index["runtimes"]:
        resolved = model.runtime(runtime["name"])
        assert runtime["system"] == resolved.system.as_json()
        wanted = {e.name: (e.optional, e.version) for e in model.index_requires(runtime["name"])}
        for need in runtime["requires"]:
            assert (need["optional"], need.get("version", "")) == wanted[need["name"]], need


def _closures(result: BuildResult, model: TargetRequirements) -> None:
    record = json.loads(
        (result.version_dir / "closures" / f"{model.target}.json").read_text("utf-8")
    )
    assert record["requirements"] == model.as_json()
    for runtime in record["runtimes"]:
        resolved = model.runtime(runtime["runtime"])
        assert {e["name"]: e["optional"] for e in runtime["externals"]} == {
            e.name: e.optional for e in resolved.externals
        }


def _sbom(result: BuildResult, model: TargetRequirements) -> None:
    sbom = json.loads((result.version_dir / SBOM_NAME).read_text("utf-8"))
    properties = [
        (p["name"], p["value"])
        for p in sbom["metadata"]["component"]["properties"]
        if p["value"].startswith(f"{model.target} ")
    ]
    libraries = [v.split() for n, v in properties if n == "ortbundle:requires-library"]
    assert {v[1]: v[3] == "optional" for v in libraries} == _optional(model)
    runs_on = model.runs_on or "no versioned system requirement"
    assert ("ortbundle:runs-on", f"{model.target} {runs_on}") in properties


def _report(result: BuildResult, model: TargetRequirements) -> None:
    html = (result.version_dir / REPORT_NAME).read_text("utf-8")
    section = html.split(f'<div class="requirements" data-target="{model.target}">', 1)[1]
    section = section.split("</div>", 1)[0]
    for group in model.groups:
        row = section.split(f'data-group="{group.group}"', 1)[1].split("</tr>", 1)[0]
        badge = "badge optional" if group.optional else "badge required"
        assert badge in row, (model.target, group.group)
    assert f"Runs on {model.runs_on or 'any system of the target'}." in section


def _installer(result: BuildResult, model: TargetRequirements) -> None:
    """The DLLs it looks for: each required group's among the required, optional's apart."""
    script = (result.version_dir / "packaging/nsis/installer.nsi").read_text("utf-8-sig")
    lines = script.splitlines()
    for group in model.groups:
        if group.kind not in CHECKED_KINDS:
            continue
        kind = "Optional" if group.optional else "Required"
        other = "Required" if group.optional else "Optional"
        for name in group.names:
            assert any(f"StrCpy $Missing{kind}" in x and name in x for x in lines), name
            assert not any(f"StrCpy $Missing{other}" in x and name in x for x in lines), name
    windows = model.system.windows
    found = re.search(r"\$\{IfNot\} \$\{AtLeastWin([0-9.]+|Vista)\}", script)
    wanted = WINVER[windows.version] if windows is not None else None
    assert (found.group(1) if found else None) == wanted


def _notes(notes: tuple[str, ...], pattern: str) -> dict[str, set[str]]:
    """relation -> the libraries the channel's notes say it is for."""
    found: dict[str, set[str]] = {}
    for note in notes:
        match = re.match(pattern, note)
        if match:
            libraries = {n.strip() for n in match.group("libs").split(",")}
            found.setdefault(match.group("relation"), set()).update(libraries)
    return found


def _arch(result: BuildResult, notes: tuple[str, ...], model: TargetRequirements) -> None:
    said = _notes(notes, r"^(?P<relation>depends|optdepends) \S+: for (?P<libs>.*) \(group ")
    optional = _optional(model)
    required = {name for name, o in optional.items() if not o}
    assert said.get("depends", set()) - {"the main package (darkroom)"} == required
    assert all(optional[name] for name in said.get("optdepends", set()))
    pkgbuild = (result.version_dir / "packaging/arch/PKGBUILD").read_text("utf-8")
    glibc = model.system.glibc
    versioned = re.findall(r"'glibc>=([0-9.]+)'", pkgbuild)
    assert versioned == ([glibc.version] if glibc is not None else [])


def _linux_package(channel: str, notes: tuple[str, ...], model: TargetRequirements) -> None:
    """An optional library is never a hard dependency; every hard dependency is required."""
    said = _notes(notes, r"^(?P<relation>depends|recommends|suggests) .+?: for (?P<libs>.*)$")
    optional = _optional(model)
    assert all(not optional[name] for name in said.get("depends", set())), channel
    weaker = said.get("recommends", set()) | said.get("suggests", set())
    assert all(optional[name] for name in weaker - said.get("depends", set())), channel


def _flatpak(result: BuildResult, notes: tuple[str, ...], model: TargetRequirements) -> None:
    """A host-only library in the Flatpak is an optional one, and its note says so; a
    required one is only in a runtime the Flatpak leaves out."""
    skipped = set(result.plan.product.packaging.flatpak_skip_runtimes)
    for external in model.externals:
        if external.sandbox:
            continue
        owners = {user.split("/")[1] for user in external.needed_by}
        if external.optional:
            assert any(external.name in n and "will not work" in n for n in notes)
        else:
            assert owners <= skipped, external.name
