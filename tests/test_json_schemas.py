"""JSON Schemas for editors, written from the one schema: current, named by every shipped input
file's first line, kept by the readers and by `pin`, written by `new-recipe`, and agreeing with
the build: taplo rejects a misspelt key the build rejects, listing the key the build suggests."""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
from pathlib import Path

import jsonschema
import pytest

from ortbundle.cli.common import CommandFailed
from ortbundle.cli.docs import run_docs
from ortbundle.config.gpu_vendors import LOADER_COPY
from ortbundle.config.plan import load_plan
from ortbundle.config.project import BuildOptions, Project
from ortbundle.config.schema import ConfigProblems, problems_in
from ortbundle.config.schema.jsonschema import KINDS, SCHEMAS, directive, render_all, stale
from ortbundle.tools.pin.rewrite import SourceMove, rewrite_recipe
from ortbundle.tools.scaffold.render import product_text

ROOT = Path(__file__).resolve().parents[1]
TAPLO_HINT = "taplo not installed (python3 -m pip install taplo==0.9.3, see requirements-dev.txt)"
SHIPPED = {
    "recipe": sorted((ROOT / "recipes").glob("*.toml")),
    "product": sorted((ROOT / "manifests").glob("*.toml")),
    "policy": [ROOT / "licenses" / "policy.toml"],
}


def _schema(kind: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((ROOT / SCHEMAS / f"{kind}.json").read_text("utf-8"))
    return loaded


def test_the_committed_schemas_are_current(tmp_path: Path) -> None:
    assert stale(ROOT) == [], "schemas/ is stale: run invoke docs and commit it"
    assert set(render_all()) == set(KINDS)
    # the check bites: an edited schema is stale, and `invoke docs --check` says so (exit 1)
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copytree(ROOT / SCHEMAS, tmp_path / SCHEMAS)
    (tmp_path / LOADER_COPY).parent.mkdir(parents=True)
    shutil.copy(ROOT / LOADER_COPY, tmp_path / LOADER_COPY)
    run_docs(check=True, root=tmp_path)
    (tmp_path / SCHEMAS / "policy.json").write_text("{}\n")
    with pytest.raises(CommandFailed) as caught:
        run_docs(check=True, root=tmp_path)
    assert caught.value.code == 1
    assert "schemas/policy.json" in str(caught.value)


@pytest.mark.parametrize("kind", KINDS)
def test_every_shipped_file_names_its_schema_first_and_is_valid_under_it(kind: str) -> None:
    assert SHIPPED[kind], kind
    validator = jsonschema.Draft7Validator(_schema(kind))
    for path in SHIPPED[kind]:
        text = path.read_text("utf-8")
        assert text.splitlines()[0] == directive(kind) == f"#:schema ../schemas/{kind}.json"
        data = json.loads(json.dumps(tomllib.loads(text), default=str))  # dates as text
        assert [e.message for e in validator.iter_errors(data)] == [], path.name


def test_the_schemas_refuse_what_the_build_refuses() -> None:
    recipe = jsonschema.Draft7Validator(_schema("recipe"))
    text = (ROOT / "recipes" / "stock.toml").read_text("utf-8")
    good = tomllib.loads(text)
    assert recipe.is_valid(good)
    for bad in (
        {**good, "component": {**good["component"], "knd": "runtime"}},  # a misspelt key
        {**good, "component": {**good["component"], "kind": "runtim"}},  # not one of the kinds
        {k: v for k, v in good.items() if k != "sources"},  # a missing table
    ):
        assert not recipe.is_valid(bad)
        assert problems_in("recipes/stock.toml", bad, "recipe")
    model = tomllib.loads((ROOT / "recipes" / "sigmoid.toml").read_text("utf-8"))
    assert model["component"]["kind"] == "model"
    assert recipe.is_valid(model)  # a model recipe is judged by the model recipe's schema
    assert not recipe.is_valid({**model, "targets": good["targets"]})


def test_readers_and_pin_keep_the_directive() -> None:
    text = (ROOT / "recipes" / "webgpu.toml").read_text()
    plan = load_plan(Project.at(ROOT), BuildOptions(product="darkroom"), parse_models=False)
    assert plan.recipes["webgpu"].name == "webgpu"  # read with its directive
    old = "onnxruntime_webgpu-1.27.0-cp311-cp311-win_amd64.whl"
    move = SourceMove(
        "ort-windows", "onnxruntime-webgpu", "1.27.0", old, "1.28.0",
        old.replace("1.27.0", "1.28.0"), "a" * 64, 1, None,
    )  # fmt: skip
    new, edits, _ = rewrite_recipe(text, [move], "onnxruntime-webgpu", True)
    assert edits
    assert new.splitlines()[0] == directive("recipe")


def test_new_recipe_writes_the_directive() -> None:
    text = product_text("myapp", "stock", ["linux-x86_64"])
    assert text.startswith(directive("product") + "\n")
    assert tomllib.loads(text)["product"]["name"] == "myapp"


# --- taplo ----------------------------------------------------------------------------------


def _taplo(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    if shutil.which("taplo") is None:
        pytest.skip(TAPLO_HINT)
    return subprocess.run(
        ["taplo", "check", "--no-auto-config", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin:" + str(Path(shutil.which("taplo") or "").parent)},
    )


def test_taplo_validates_every_toml_file_of_the_repository() -> None:
    listed = subprocess.run(
        ["git", "ls-files", "*.toml"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert "pyproject.toml" in listed and "manifests/darkroom.toml" in listed
    done = _taplo(*listed)
    assert done.returncode == 0, done.stderr
    assert f"found files total={len(listed)}" in done.stderr


def test_a_misspelt_key_is_refused_by_taplo_and_the_build_alike(tmp_path: Path) -> None:
    for name in ("recipes", "manifests", "licenses", "schemas"):
        shutil.copytree(ROOT / name, tmp_path / name)
    manifest = tmp_path / "manifests" / "darkroom.toml"
    text = manifest.read_text("utf-8")
    assert "\npkgrel = " not in text
    manifest.write_text(text.replace("[packaging]\n", "[packaging]\npkgrell = 2\n", 1))
    done = _taplo("manifests/darkroom.toml", cwd=tmp_path)
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert '"pkgrell" is not one of [' in said
    with pytest.raises(ConfigProblems) as caught:
        load_plan(Project.at(tmp_path), BuildOptions(product="darkroom"))
    (problem,) = caught.value.problems
    assert (problem.key, problem.suggestion) == ("pkgrell", "pkgrel")
    listed = said.split('"pkgrell" is not one of [', 1)[1].split("]", 1)[0]
    assert f'"{problem.suggestion}"' in listed.split(",")  # taplo offers the build's suggestion
    manifest.write_text(text)
    assert _taplo("manifests/darkroom.toml", cwd=tmp_path).returncode == 0
