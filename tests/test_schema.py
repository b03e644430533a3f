"""The input schema: typos refused with the nearest valid key or value, every problem of a build
reported at once, the shipped files valid, and docs/configuration.md generated from it."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from ortbundle._core.errors import ConfigError
from ortbundle.cli.build import run_build
from ortbundle.cli.common import CommandFailed
from ortbundle.config.model_recipes import load_model_recipe
from ortbundle.config.plan import BuildOptions, Project, load_plan
from ortbundle.config.products import load_product
from ortbundle.config.recipes import load_recipe
from ortbundle.config.schema import ConfigProblems, problems_in
from ortbundle.config.schema.docs import REFERENCE, is_current, render
from ortbundle.config.sources import load_sources
from ortbundle.tools.ci_workflow import load_action_pins

ROOT = Path(__file__).resolve().parent.parent
SHA = "ab" * 32


def recipe(name: str, targets: tuple[str, ...] = ("linux-x86_64",)) -> dict[str, Any]:
    """A minimal valid runtime recipe."""
    return {
        "component": {
            "name": name,
            "kind": "runtime",
            "version": "1.0.0",
            "description": "a runtime",
            "providers": ["CPUExecutionProvider"],
            "gpu_vendors": ["nvidia"],
        },
        "sources": {
            "wheel": {"pypi": {"project": "p", "version": "1", "filename": "p.whl"}, "sha256": SHA}
        },
        "targets": {
            t: {
                "entry": "libonnxruntime.so*",
                "roots": ["libonnxruntime.so*"],
                "take": [{"source": "wheel", "libraries": ["*.so"]}],
            }
            for t in targets
        },
    }


def product(runtimes: list[str], targets: list[str]) -> dict[str, Any]:
    return {
        "product": {
            "name": "app",
            "version": "1.0",
            "description": "an app",
            "url": "https://example.invalid/",
            "targets": targets,
            "runtimes": runtimes,
        }
    }


def write(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomlkit.dumps(data), "utf-8")
    return path


def refused(load: Any, path: Path) -> ConfigProblems:
    with pytest.raises(ConfigProblems) as caught:
        load(path)
    assert caught.value.exit_code == 2
    return caught.value


def test_gpu_vendor_typo_is_refused_naming_the_key_it_meant(tmp_path: Path) -> None:
    data = recipe("x")
    data["component"]["gpu_vendor"] = data["component"].pop("gpu_vendors")
    error = refused(load_recipe, write(tmp_path / "recipes/x.toml", data))
    assert error.problems[0].line() == (
        "`gpu_vendor`: unknown key in [component] of recipes/x.toml — did you mean `gpu_vendors`?"
    )
    assert str(error) == f"{error.problems[0].line()} [file {tmp_path / 'recipes/x.toml'}]"


def test_upper_case_vendor_is_refused_with_the_lower_case_one(tmp_path: Path) -> None:
    data = recipe("x")
    data["component"]["gpu_vendors"] = ["NVIDIA"]
    error = refused(load_recipe, write(tmp_path / "recipes/x.toml", data))
    assert "'NVIDIA' is not a GPU vendor" in str(error)
    assert "did you mean `nvidia`?" in str(error)


def _rule(**more: Any) -> dict[str, Any]:
    return {
        "component": "x",
        "version": "1.0.0",
        "expression": "MIT",
        "files": ["*"],
        "texts": [{"source": "wheel", "member": "LICENSE"}],
        **more,
    }


def test_a_licence_rule_carries_its_guesses_licensor_and_confirmation(tmp_path: Path) -> None:
    """Guesses are data, not comments: the audit and a release read them."""
    data = recipe("x")
    confirmed = {
        "reviewer": "Ada Lovelace",
        "reason": "the version resource's holder is the LICENSE's",
        "sha256": [SHA],
        "reviewed": tomlkit.date("2026-12-01"),
    }
    data["targets"]["linux-x86_64"]["licenses"] = [
        _rule(guessed=["expression", "files"], licensor=["Acme Corp"], confirmed=confirmed)
    ]
    (rule,) = load_recipe(write(tmp_path / "recipes/x.toml", data)).targets["linux-x86_64"].licenses
    assert rule.guessed == ("expression", "files") and rule.licensor == ("Acme Corp",)
    assert rule.confirmed is not None and rule.confirmed.reviewer == "Ada Lovelace"
    assert rule.confirmed.sha256 == (SHA,) and str(rule.confirmed.reviewed) == "2026-12-01"
    assert rule.confirmed.expires is None
    # none of it is in the repr the pruned runtime's memo key is made of: confirming a rule
    # never prunes again
    assert "guessed" not in repr(rule) and "Ada" not in repr(rule)


def test_a_guess_or_a_confirmation_misspelt_is_refused(tmp_path: Path) -> None:
    data = recipe("x")
    bad = {"reviewer": "Ada", "reason": "read", "sha256": ["AB" * 32], "reviwed": "2026-12-01"}
    data["targets"]["linux-x86_64"]["licenses"] = [_rule(guessed=["expresion"], confirmed=bad)]
    error = refused(load_recipe, write(tmp_path / "recipes/x.toml", data))
    lines = [p.line() for p in error.problems]
    assert any(
        "'expresion' is not a licence rule key" in line and "`expression`?" in line
        for line in lines
    ), lines
    assert any("`reviwed`: unknown key" in line and "`reviewed`?" in line for line in lines), lines
    assert any("64 lower-case hex digits" in line for line in lines), lines


def test_product_channels_typo_is_refused(tmp_path: Path) -> None:
    data = product(["x"], ["linux-x86_64"])
    data["product"]["chanels"] = ["arch"]
    error = refused(load_product, write(tmp_path / "manifests/app.toml", data))
    assert str(error).startswith(
        "`chanels`: unknown key in [product] of manifests/app.toml — did you mean `channels`?"
    )


def test_enumerations_are_checked_case_included(tmp_path: Path) -> None:
    data = product(["x"], ["Linux-x86_64"])
    data["product"]["channels"] = ["Arch"]
    data["externals"] = [{"group": "cuda", "kind": "Toolkit", "names": ["libcudart.so.13"]}]
    lines = [p.line() for p in problems_in("manifests/app.toml", data, "product")]
    for wrong, right in (
        ("Linux-x86_64", "linux-x86_64"),
        ("Arch", "arch"),
        ("Toolkit", "toolkit"),
    ):
        assert any(f"{wrong!r} is not " in line and f"`{right}`?" in line for line in lines)


def test_an_unknown_target_table_in_a_recipe_suggests_the_target(tmp_path: Path) -> None:
    data = recipe("x")
    data["targets"]["linux-x86_65"] = data["targets"].pop("linux-x86_64")
    error = refused(load_recipe, write(tmp_path / "recipes/x.toml", data))
    assert "unknown target" in str(error) and "did you mean `linux-x86_64`?" in str(error)


@pytest.mark.parametrize(
    ("kind", "source", "table", "where"),
    [
        ("recipe", "recipes/webgpu.toml", ("targets", "linux-x86_64"), "targets.linux-x86_64"),
        ("recipe", "recipes/sigmoid.toml", ("license",), "license"),
        ("product", "manifests/darkroom.toml", ("packaging",), "packaging"),
        ("policy", "licenses/policy.toml", ("channels", "arch"), "channels.arch"),
        ("targets-data", "ortbundle/data/targets.toml", ("windows-x86_64",), "windows-x86_64"),
        ("arch-data", "ortbundle/data/arch.toml", ("groups", "vulkan"), "groups.vulkan"),
        ("linux-packages-data", "ortbundle/data/linux-packages.toml", ("deb", "zlib"), "deb.zlib"),
        ("baselines-data", "ortbundle/data/baselines.toml", ("android",), "android"),
        ("actions-data", "ortbundle/data/actions.toml", (), ""),
    ],
)
def test_an_unknown_key_in_each_file_kind(
    kind: str, source: str, table: tuple[str, ...], where: str
) -> None:
    data = tomllib.loads((ROOT / source).read_text("utf-8"))
    assert problems_in(source, data, kind) == []
    place: Any = data
    for name in table:
        place = place[name]
    place["bogus_key"] = "x"
    found = problems_in(source, data, kind)
    assert [(p.table, p.key, p.message) for p in found] == [(where, "bogus_key", "unknown key")]


def test_each_loader_checks_its_file(tmp_path: Path) -> None:
    """The hook where each file is read: recipe, model recipe, product, sources, policy, data."""
    model = tomllib.loads((ROOT / "recipes/sigmoid.toml").read_text("utf-8"))
    model["forms"][0]["canonicall"] = True
    assert "did you mean `canonical`?" in str(
        refused(load_model_recipe, write(tmp_path / "recipes/sigmoid.toml", model))
    )
    data = recipe("y")
    data["sources"]["wheel"]["sha265"] = SHA
    path = write(tmp_path / "recipes/y.toml", data)
    assert "did you mean `sha256`?" in str(refused(load_sources, path))
    from ortbundle.licensing.audit import load_policy

    policy = tomllib.loads((ROOT / "licenses/policy.toml").read_text("utf-8"))
    policy["channels"]["arch"]["unknwon"] = "review"
    assert "did you mean `unknown`?" in str(
        refused(load_policy, write(tmp_path / "licenses/policy.toml", policy))
    )
    with pytest.raises(ConfigProblems, match="did you mean `commit`"):
        load_action_pins('[actions."a/b"]\nversion = "v1"\ncommmit = "' + "0" * 40 + '"\n')


def test_pin_check_reads_unpinned_sources_but_still_refuses_typos(tmp_path: Path) -> None:
    data = recipe("z")
    del data["sources"]["wheel"]["sha256"]
    path = write(tmp_path / "recipes/z.toml", data)
    assert load_sources(path, pinned=False)["wheel"].sha256 == ""
    data["sources"]["wheel"]["hodl"] = "why"
    write(path, data)
    with pytest.raises(ConfigProblems, match="did you mean `hold`"):
        load_sources(path, pinned=False)


def test_wrong_types_are_named(tmp_path: Path) -> None:
    data = product(["x"], ["linux-x86_64"])
    data["packaging"] = {"pkgrel": "2"}
    data["system"] = {"android_api": 0}
    data["runtime"] = {"x": {"targets": "linux-x86_64"}}  # one string is not a list
    error = refused(load_product, write(tmp_path / "manifests/app.toml", data))
    assert [p.line() for p in error.problems] == [
        "`pkgrel`: must be an integer, not '2' in [packaging] of manifests/app.toml",
        "`android_api`: must be a positive integer, not 0 in [system] of manifests/app.toml",
        "`targets`: must be a list of non-empty strings, not 'linux-x86_64' in [runtime.x] of "
        "manifests/app.toml",
    ]


def test_a_package_url_is_checked_with_the_parse_s_own_pattern(tmp_path: Path) -> None:
    data = recipe("x")
    data["targets"]["linux-x86_64"]["licenses"] = [
        {
            "component": "x",
            "version": "1",
            "expression": "MIT",
            "files": ["*"],
            "texts": [],
            "purl": "pypi/x@1",
        }
    ]
    error = refused(load_recipe, write(tmp_path / "recipes/x.toml", data))
    assert "`purl`: 'pypi/x@1' is not a package URL" in str(error)


def test_the_contract_keys_of_the_other_slices_are_accepted() -> None:
    """[[externals]] (product, recipe), loads / ignore_loads, addon_of and the [policy] overlay."""
    externals = [
        {
            "group": "cudnn",
            "kind": "toolkit",
            "targets": ["linux-x86_64"],
            "names": ["libcudnn.so.9"],
            "optional": False,
            "version": ">=9",
            "note": "NVIDIA cuDNN 9",
            "install": "Install NVIDIA cuDNN 9 for CUDA 13",
            "sandbox": False,
            "arch": {"optdepends": [{"package": "cudnn", "reason": "cuDNN"}]},
            "deb": {"depends": ["libcudnn9"]},
            "rpm": {"sonames": "depends"},
        }
    ]
    data = product(["x"], ["linux-x86_64"])
    data["product"]["addon_of"] = "darkroom"
    data["externals"] = externals
    data["policy"] = {
        "sets": {"mine": ["LicenseRef-Acme-*"]},
        "channels": {"arch": {"allow": ["@mine"], "unknown": "review"}},
    }
    assert problems_in("manifests/app.toml", data, "product") == []
    runtime = recipe("x")
    runtime["externals"] = externals
    runtime["targets"]["linux-x86_64"]["loads"] = ["libcudnn.so.9"]
    runtime["targets"]["linux-x86_64"]["ignore_loads"] = [{"names": ["libfoo.so"], "reason": "r"}]
    assert problems_in("recipes/x.toml", runtime, "recipe") == []


def test_every_problem_of_a_build_is_reported_in_one_run(tmp_path: Path) -> None:
    """Three typos in two recipes, a product typo, a misnamed [runtime.<name>] and two targets a
    recipe lacks: one error, exit 2, one line each, no traceback."""
    targets = ["linux-x86_64", "windows-x86_64", "windows-arm64"]
    app = product(["a", "b"], targets)
    app["product"]["chanels"] = ["arch"]
    app["runtime"] = {"bb": {"targets": ["linux-x86_64"]}}
    write(tmp_path / "manifests/app.toml", app)
    a = recipe("a", tuple(targets))
    a["component"]["gpu_vendor"] = a["component"].pop("gpu_vendors")
    a["targets"]["windows-x86_64"]["roots"] = 3
    write(tmp_path / "recipes/a.toml", a)
    b = recipe("b")  # linux only: windows-x86_64 and windows-arm64 are missing
    b["component"]["gpu_vendors"] = ["NVIDIA"]
    write(tmp_path / "recipes/b.toml", b)
    (tmp_path / "licenses").mkdir()
    (tmp_path / "licenses/policy.toml").write_text((ROOT / "licenses/policy.toml").read_text())
    with pytest.raises(ConfigProblems) as caught:
        load_plan(Project.at(tmp_path), BuildOptions(product="app"))
    lines = [p.line() for p in caught.value.problems]
    expected = [
        "`chanels`: unknown key in [product] of manifests/app.toml",
        "`bb`: names no runtime of [product] runtimes in [runtime] of manifests/app.toml",
        "`gpu_vendor`: unknown key in [component] of recipes/a.toml",
        "`roots`: must be a list of non-empty strings, not 3 in [targets.windows-x86_64]",
        "'NVIDIA' is not a GPU vendor",
        "`windows-x86_64`: missing: manifests/app.toml ships b on windows-x86_64",
        "`windows-arm64`: missing: manifests/app.toml ships b on windows-arm64",
    ]
    for want in expected:
        assert sum(want in line for line in lines) == 1, (want, lines)
    assert len(lines) == len(expected)
    with pytest.raises(CommandFailed) as failed:
        run_build(BuildOptions(product="app", cache_dir=tmp_path / "cache"), root=tmp_path)
    assert failed.value.code == 2
    message = str(failed.value)
    assert message.startswith("ortbundle: configuration error: 7 configuration problems in ")
    assert len(message.splitlines()) == 8 and "Traceback" not in message


def test_the_shipped_recipes_manifests_policy_and_data_validate() -> None:
    for path in sorted((ROOT / "recipes").glob("*.toml")):
        data = tomllib.loads(path.read_text("utf-8"))
        assert problems_in(path.name, data, "recipe") == [], path
    for path in sorted((ROOT / "manifests").glob("*.toml")):
        assert problems_in(path.name, tomllib.loads(path.read_text("utf-8")), "product") == []
        load_plan(Project.at(ROOT), BuildOptions(product=path.stem))
    policy = tomllib.loads((ROOT / "licenses/policy.toml").read_text("utf-8"))
    assert problems_in("policy.toml", policy, "policy") == []
    for name in ("targets", "arch", "linux-packages", "baselines", "actions"):
        data = tomllib.loads((ROOT / f"ortbundle/data/{name}.toml").read_text("utf-8"))
        assert problems_in(name, data, f"{name}-data") == [], name


def test_the_committed_reference_is_current(tmp_path: Path) -> None:
    assert is_current(ROOT), "docs/configuration.md is stale: run invoke docs and commit it"
    stale = tmp_path / REFERENCE
    stale.parent.mkdir(parents=True)
    stale.write_text(render().replace("`gpu_vendors`", "`gpu_vendor`"), "utf-8")
    assert not is_current(tmp_path)


def test_the_reference_documents_every_key_and_enumeration() -> None:
    text = render()
    for needle in (
        "`gpu_vendors`",
        "`nvidia`",
        "`addon_of`",
        "`ignore_loads`",
        "`toolkit`",
        "`loads`",
        "`sandbox`",
        "`[policy]`",
        "`[[externals]]`",
        "`linux-x86_64`",
    ):
        assert needle in text, needle


def test_a_config_error_is_still_a_config_error() -> None:
    assert issubclass(ConfigProblems, ConfigError)


@pytest.mark.parametrize(
    ("module", "reader", "name"),
    [
        ("ortbundle.config.targets", "all_targets", "targets"),
        ("ortbundle.channels.arch", "_mapping", "arch"),
        ("ortbundle.channels.nfpm", "_mapping", "linux-packages"),
        ("ortbundle.stage.binaries.baseline", "_data", "baselines"),
    ],
)
def test_the_tool_data_readers_check_their_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, reader: str, name: str
) -> None:
    """Each reader of ortbundle/data/ checks the file it reads (here a copy with a typo)."""
    import importlib
    from types import SimpleNamespace

    data = tomllib.loads((ROOT / f"ortbundle/data/{name}.toml").read_text("utf-8"))
    (data["linux-x86_64"] if name == "targets" else data)["zz_typo"] = {}
    write(tmp_path / f"data/{name}.toml", data)
    loaded = importlib.import_module(module)
    read = getattr(loaded, reader)
    monkeypatch.setattr(loaded, "resources", SimpleNamespace(files=lambda _package: tmp_path))
    read.cache_clear()
    try:
        with pytest.raises(ConfigProblems, match=f"`zz_typo`: .* of ortbundle/data/{name}.toml"):
            read("deb") if name == "linux-packages" else read()
    finally:
        monkeypatch.undo()
        read.cache_clear()
