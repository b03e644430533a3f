"""The scaffold on a real wheel: `onnxruntime` (CPU) at the version recipes/stock.toml pins,
through pip's configured index and the shared download cache, for linux-x86_64 only; the recipe
it writes builds in a project outside the repository."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from ortbundle._core.progress import plain_reporter
from ortbundle.config.plan import BuildOptions, Project
from ortbundle.pipeline.build import build
from ortbundle.tools.scaffold import ScaffoldOptions, new_recipe
from tests.helpers.project import REPO_POLICY
from tests.helpers.real import ROOT

pytestmark = pytest.mark.real


def test_scaffold_on_the_real_onnxruntime_wheel_builds(tmp_path: Path) -> None:
    stock = tomllib.loads((ROOT / "recipes/stock.toml").read_text("utf-8"))
    version = stock["component"]["version"]
    root = tmp_path / "app"
    (root / "licenses").mkdir(parents=True)
    (root / "licenses/policy.toml").write_text(REPO_POLICY.read_text("utf-8"))
    project = Project.at(root)
    reporter = plain_reporter()
    result = new_recipe(
        project,
        ScaffoldOptions(f"pypi:onnxruntime=={version}", product="myapp", targets=("linux-x86_64",)),
        reporter,
    )
    assert result.choices == ()
    recipe = tomllib.loads(result.recipe.read_text("utf-8"))
    linux = recipe["targets"]["linux-x86_64"]
    assert linux["entry"] == "libonnxruntime.so.*.*.*"
    assert linux["roots"] == ["libonnxruntime.so.*", "libonnxruntime_providers_shared.so"]
    assert linux["drop"] == [{"names": ["onnxruntime_pybind11_state*"], "reason": "Python binding"}]
    assert linux["licenses"][0]["expression"] == "MIT"
    assert {t["member"] for t in linux["licenses"][0]["texts"]} >= {
        "onnxruntime/LICENSE",
        "onnxruntime/ThirdPartyNotices.txt",
    }

    built = build(project, BuildOptions(product="myapp"), reporter)
    staged = root / "dist/myapp/0.1.0/linux-x86_64/runtimes/onnxruntime"
    assert sorted(p.name for p in staged.iterdir()) == [
        "libonnxruntime.so.1",
        f"libonnxruntime.so.{version}",
        "libonnxruntime_providers_shared.so",
    ]
    assert [t.target for t in built.targets] == ["linux-x86_64"]


def test_scaffold_on_the_real_directml_wheel_tells_microsofts_terms_from_the_wheels(
    tmp_path: Path,
) -> None:
    """`onnxruntime-directml` 1.24.4 as a new user scaffolds it: the core's own provider table
    gives DML and CPU; DirectML.dll, which says "Microsoft Corporation. All rights reserved."
    and which no text in the wheel covers, gets a rule of its own under Microsoft's terms, every
    guess is data, and the build's audit reviews it instead of allowing it as MIT; d3d12.dll
    makes the oldest system Windows 10."""
    root = tmp_path / "app"
    (root / "licenses").mkdir(parents=True)
    (root / "licenses/policy.toml").write_text(REPO_POLICY.read_text("utf-8"))
    project = Project.at(root)
    reporter = plain_reporter()
    result = new_recipe(
        project,
        ScaffoldOptions(
            "pypi:onnxruntime-directml==1.24.4", product="dml", targets=("windows-x86_64",)
        ),
        reporter,
    )
    recipe = tomllib.loads(result.recipe.read_text("utf-8"))
    assert recipe["component"]["kind"] == "runtime"
    assert recipe["component"]["providers"] == ["DmlExecutionProvider", "CPUExecutionProvider"]
    rules = recipe["targets"]["windows-x86_64"]["licenses"]
    (directml,) = [r for r in rules if r["files"] == ["DirectML.dll"]]
    assert directml["expression"].startswith("LicenseRef-Microsoft-"), directml
    assert directml["version"] == "1.15.4"  # the DLL's own ProductVersion
    assert all(r["guessed"] for r in rules)  # a release refuses until a person checks each

    built = build(project, BuildOptions(product="dml"), reporter)
    (target,) = built.targets
    assert target.requirements.runs_on.startswith("Windows 10"), target.requirements.runs_on
    components = {c.name: c for a in built.audits for c in a.components}
    assert components[directml["component"]].verdict != "allow"
    assert components[directml["component"]].status != "ok"
