"""`invoke new-recipe` on the two products of issue #30, as their real wheels are (FACTS.md,
"Added 2026-12-02"), built synthetically: the scaffold reads what each DLL says of itself,
splits the licence rules by it, proposes another holder's files as that holder's terms for
review, reads the product version, and writes its guesses into the recipe as data."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ortbundle._core.progress import Reporter
from ortbundle.config.plan import Project
from ortbundle.fetch.archives import ZipArchive
from ortbundle.pipeline.build import AuditFailed, build
from ortbundle.tools.scaffold import new_recipe
from ortbundle.tools.scaffold.propose import licence
from tests.helpers.index_server import IndexServer
from tests.helpers.pe import make_pe
from tests.helpers.project import CORE_EXPORTS, PLUGIN_EXPORTS
from tests.helpers.wheels import make_wheel
from tests.test_scaffold import _root, build_options, options

TAG = "cp312-cp312-win_amd64"
MICROSOFT_MIT = b"MIT License\n\nCopyright (c) Microsoft Corporation\n\nPermission is hereby granted, free of charge, ...\n"
NOTICES = b"THIRD PARTY SOFTWARE NOTICES AND INFORMATION\n\nprotobuf\nCopyright 2008 Google Inc.\n"
# ONNX Runtime's own DLLs, as the pinned wheels' version resources read (measured)
ORT = {
    "CompanyName": "Microsoft Corporation",
    "FileDescription": "ONNX Runtime",
    "ProductName": "Microsoft® Windows® Operating System",
    "LegalCopyright": "© Microsoft Corporation. All rights reserved.",
    "FileVersion": "1.24.4",
    "ProductVersion": "1.24.4",
}
DIRECTML = {
    "CompanyName": "Microsoft Corporation",
    "FileDescription": "DirectML Redistributable Library",
    "ProductName": "DirectML Redistributable Library",
    "LegalCopyright": "© Microsoft Corporation. All rights reserved.",
    "FileVersion": "1.15.4",
    "ProductVersion": "1.15.4",
}


def _dll(version: dict[str, str], *imports: str, tag: str = "", **facts: Any) -> bytes:
    """A DLL with its version resource; `facts`: its exports, strings or provider table."""
    return make_pe(
        imports=("KERNEL32.dll", *imports), version=version, payload=tag.encode(), **facts
    )


@pytest.fixture
def wheels(tmp_path: Path) -> Iterator[IndexServer]:
    where = tmp_path / "wheels"
    with IndexServer().running() as server:
        directml = {
            "onnxruntime/capi/onnxruntime.dll": _dll(
                ORT,
                "DirectML.dll",
                "d3d12.dll",
                tag="core",
                exports=CORE_EXPORTS,
                provider_table=(("DmlExecutionProvider", True), ("CPUExecutionProvider", True)),
            ),
            # the core's product at another build number: still the archive's own
            "onnxruntime/capi/onnxruntime_providers_shared.dll": _dll(
                {**ORT, "ProductVersion": "1.24.4.7"}, tag="shared"
            ),
            "onnxruntime/capi/DirectML.dll": _dll(DIRECTML, "d3d12.dll"),
            "onnxruntime/capi/onnxruntime_pybind11_state.pyd": make_pe(imports=("python312.dll",)),
            "onnxruntime/LICENSE": MICROSOFT_MIT,
            "onnxruntime/ThirdPartyNotices.txt": NOTICES,
        }
        server.add(
            "onnxruntime-directml",
            make_wheel(
                where / f"onnxruntime_directml-1.24.4-{TAG}.whl",
                "onnxruntime-directml",
                "1.24.4",
                directml,
                metadata="Classifier: License :: OSI Approved :: MIT License\n",
            ),
        )
        server.add(
            "onnxruntime-ep-nv-tensorrt-rtx-cu13",
            make_wheel(
                where / f"onnxruntime_ep_nv_tensorrt_rtx_cu13-0.5.0-{TAG}.whl",
                "onnxruntime-ep-nv-tensorrt-rtx-cu13",
                "0.5.0",
                _nvidia_members(),
                metadata="License-Expression: Apache-2.0\n",
            ),
        )
        yield server


def _nvidia(product: str, version: str, file_version: str = "") -> dict[str, str]:
    """An NVIDIA DLL's version resource; FACTS.md records the versions, not the other strings,
    so these carry the company and product only."""
    return {
        "CompanyName": "NVIDIA Corporation",
        "ProductName": product,
        "ProductVersion": version,
        "FileVersion": file_version or version,
    }


def _nvidia_members() -> dict[str, bytes]:
    base = "onnxruntime_ep_nv_tensorrt_rtx"
    return {
        f"{base}/onnxruntime_providers_nv_tensorrt_rtx.dll": _dll(
            _nvidia("ONNX Runtime NV TensorRT-RTX EP", "0.5.0"),
            "tensorrt_rtx_1_7.dll",
            "tensorrt_onnxparser_rtx_1_7.dll",
            "cudart64_13.dll",
            exports=PLUGIN_EXPORTS,
            rodata=("NvTensorRTRTXExecutionProvider",),
        ),
        f"{base}/tensorrt_rtx_1_7.dll": _dll(
            _nvidia("TensorRT-RTX", "1.7.0.11"), "cudart64_13.dll"
        ),
        f"{base}/tensorrt_onnxparser_rtx_1_7.dll": _dll(
            _nvidia("TensorRT-RTX", "1.7.0.11"), "tensorrt_rtx_1_7.dll", tag="parser"
        ),
        f"{base}/tensorrt_plugins.dll": _dll(
            _nvidia("TensorRT-RTX", "1.7.0.11"), "tensorrt_rtx_1_7.dll", tag="plugins"
        ),
        f"{base}/cudart64_13.dll": _dll(
            _nvidia("NVIDIA CUDA 13.4.46 Runtime", "13.4.46", "6.14.11.13040")
        ),
        "onnxruntime_ep_nv_tensorrt_rtx_cu13-0.5.0.dist-info/licenses/LICENSE": (
            b"Apache License\nVersion 2.0, January 2004\n...\nCopyright [yyyy] [name of copyright owner]\n"
        ),
        f"{base}/TRTRTX_Acknowledgements.txt": (
            b"TensorRT-RTX acknowledgements\nSPDX-License-Identifier: LicenseRef-NvidiaProprietary\n"
        ),
        f"{base}/TRTRTX_README.txt": b"TensorRT-RTX is governed by the NVIDIA TensorRT-RTX SLA.\n",
    }


def _rules(recipe: dict[str, Any], target: str = "windows-x86_64") -> dict[str, dict[str, Any]]:
    return {r["component"]: r for r in recipe["targets"][target]["licenses"]}


@pytest.mark.slow
def test_directml_is_proposed_as_microsofts_own_terms_not_the_wheels_mit(
    tmp_path: Path, wheels: IndexServer, reporter: Reporter
) -> None:
    root = _root(tmp_path)
    project = Project.at(root)
    result = new_recipe(
        project,
        options(tmp_path, "onnxruntime-directml", index_url=wheels.url, product="dml"),
        reporter,
    )
    recipe = tomllib.loads(result.recipe.read_text())
    rules = _rules(recipe)
    own = rules["onnxruntime-directml"]
    assert own["expression"] == "MIT" and own["files"] == [
        "onnxruntime.dll",
        "onnxruntime_providers_shared.dll",
    ]
    # the guesses are data; the classifier's MIT is no guess: the wheel's LICENSE is MIT's text
    assert own["guessed"] == ["files", "texts"]
    (dml,) = [r for name, r in rules.items() if name != "onnxruntime-directml"]
    assert dml["component"] == "directml-redistributable-library"
    assert dml["files"] == ["DirectML.dll"] and dml["version"] == "1.15.4"
    assert dml["expression"] == "LicenseRef-Microsoft-DirectML-Redistributable-Library"
    assert dml["texts"] == []  # the wheel has no DirectML licence, no notice names it
    assert dml["guessed"] == ["component", "expression", "files"]
    text = result.recipe.read_text()
    assert "DirectML.dll says '© Microsoft Corporation. All rights reserved.'" in text
    assert "no notice in the archive names them" in text
    assert "# the classifier 'MIT License' and the text of onnxruntime/LICENSE agree" in text
    assert any("DirectML.dll say they are another's" in note for note in result.notes)

    # the build warns once per guess, and its evidence is no longer false
    built = build(project, build_options(tmp_path, "dml", index_url=wheels.url), reporter)
    summary = json.loads((built.version_dir / "build-summary.json").read_text())
    (windows,) = summary["targets"]
    guesses = [w for w in windows["warnings"] if "the scaffold's guess" in w]
    assert len(guesses) == 5  # 2 keys of the wheel's own rule, 3 of DirectML's
    nsis = next(a for a in built.audits if a.channel == "nsis")
    status = {c.name: c.status for c in nsis.components}
    assert status["directml-redistributable-library"] == "fail"  # no text: not fit to ship
    assert status["onnxruntime-directml"] == "review"  # "All rights reserved" under MIT
    with pytest.raises(AuditFailed) as refused:
        strict = build_options(tmp_path, "dml", index_url=wheels.url, audit_only=True, release=True)
        build(project, strict, reporter)
    # the refusal says, once, what waits in which recipe: the guesses and the tables to paste
    # (one per rule: the wheel's own DLLs and DirectML.dll)
    assert (refused.value.fix or "").startswith(
        "in recipes/onnxruntime-directml.toml: 5 keys the scaffold guessed (check each, then "
        "remove it from its rule's `guessed`) and 2 [confirmed] tables printed above to paste "
        "once a person has reviewed its files; for anything else, add the missing texts"
    ), refused.value.fix


def test_nvidias_files_are_nvidias_terms_and_cudart_is_cuda_13_4_46(
    tmp_path: Path, wheels: IndexServer, reporter: Reporter
) -> None:
    result = new_recipe(
        Project.at(_root(tmp_path)),
        options(tmp_path, "onnxruntime-ep-nv-tensorrt-rtx-cu13", index_url=wheels.url),
        reporter,
    )
    rules = _rules(tomllib.loads(result.recipe.read_text()))
    # no file is proposed under the wheel's Apache-2.0: each says it is NVIDIA's
    assert all(r["expression"].startswith("LicenseRef-NVIDIA-") for r in rules.values())
    assert all("expression" in r["guessed"] for r in rules.values())
    by_file = {f: r for r in rules.values() for f in r["files"]}
    assert set(by_file) == {
        "onnxruntime_providers_nv_tensorrt_rtx.dll",
        "tensorrt_rtx_1_7.dll",
        "tensorrt_onnxparser_rtx_1_7.dll",
        "tensorrt_plugins.dll",
        "cudart64_13.dll",
    }
    cudart = by_file["cudart64_13.dll"]
    assert cudart["version"] == "13.4.46"  # the product's version, not the file's 6.14.11.13040
    assert cudart["expression"] == "LicenseRef-NVIDIA-CUDA-Runtime"
    trt = by_file["tensorrt_rtx_1_7.dll"]
    assert trt["expression"] == "LicenseRef-NVIDIA-TensorRT-RTX" and trt["version"] == "1.7.0.11"
    assert trt["files"] == [
        "tensorrt_onnxparser_rtx_1_7.dll",
        "tensorrt_plugins.dll",
        "tensorrt_rtx_1_7.dll",
    ]
    members = [t["member"] for t in trt["texts"]]
    assert members == [
        "onnxruntime_ep_nv_tensorrt_rtx/TRTRTX_Acknowledgements.txt",
        "onnxruntime_ep_nv_tensorrt_rtx/TRTRTX_README.txt",
    ]
    assert "say(s) LicenseRef-NvidiaProprietary" in result.recipe.read_text()


APACHE = b"Apache License\nVersion 2.0, January 2004\nhttp://www.apache.org/licenses/\n"


@pytest.mark.parametrize(
    ("members", "metadata", "why"),
    [
        # the classifier and the archive's own LICENSE agree: read from the bytes, no guess
        (
            {"pkg/LICENSE": MICROSOFT_MIT},
            "Classifier: License :: OSI Approved :: MIT License\n",
            "the classifier 'MIT License' and the text of pkg/LICENSE agree",
        ),
        (
            {"pkg/LICENSE.txt": MICROSOFT_MIT},
            "License: MIT\n",
            "the wheel's License field and the text of pkg/LICENSE.txt agree",
        ),
        # the LICENSE says another licence: the classifier stays a guess
        (
            {"pkg/LICENSE": APACHE},
            "Classifier: License :: OSI Approved :: MIT License\n",
            "guessed: the classifier 'MIT License'",
        ),
        # only a third-party notice opens with MIT's words (another's text): still a guess
        (
            {"pkg/ThirdPartyNotices.txt": MICROSOFT_MIT},
            "Classifier: License :: OSI Approved :: MIT License\n",
            "guessed: the classifier 'MIT License'",
        ),
        # a classifier's "BSD" is three licences: the text decides, and it must agree
        (
            {
                "pkg/COPYING": b"Redistribution and use in source and binary forms ... endorse or promote"
            },
            "Classifier: License :: OSI Approved :: BSD License\n",
            "the classifier 'BSD License' and the text of pkg/COPYING agree",
        ),
    ],
)
def test_a_declared_licence_the_archives_own_text_bears_out_is_read_not_guessed(
    tmp_path: Path, members: dict[str, bytes], metadata: str, why: str
) -> None:
    wheel = make_wheel(tmp_path / f"pkg-1.0-{TAG}.whl", "pkg", "1.0", members, metadata=metadata)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    found = licence(ZipArchive(wheel, label=wheel.name, component="pkg"), scratch, "pkg")
    assert found.why == why
    assert found.guessed == why.startswith("guessed")
