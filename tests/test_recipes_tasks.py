"""Recipe and manifest validation, and the task surface."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle.config.plan import DEFAULT_PRODUCT, BuildOptions, Project, load_plan
from ortbundle.config.recipes import load_recipe

ROOT = Path(__file__).resolve().parent.parent
# every text a host could hide in: code, data, docs, templates, workflows, scripts
TEXT_SUFFIXES = {
    ".py",
    ".toml",
    ".md",
    ".txt",
    ".j2",
    ".json",
    ".yml",
    ".yaml",
    ".sh",
    ".c",
    ".h",
    "",
}


def test_repository_recipes_and_default_product_load() -> None:
    plan = load_plan(Project.at(ROOT), BuildOptions(product=DEFAULT_PRODUCT))
    assert plan.targets == (
        "linux-x86_64",
        "linux-aarch64",
        "windows-x86_64",
        "windows-arm64",
        "android-arm64-v8a",
        "android-x86_64",
        "macos-arm64",
    )
    assert list(plan.recipes) == [
        "openvino",
        "webgpu",
        "stock",
        "android-generic",
        "stock-macos",
        "ep-webgpu",
    ]
    assert plan.plugins_for("windows-arm64") == ["ep-webgpu"]
    assert plan.plugins_for("linux-aarch64") == ["ep-webgpu"]
    assert plan.plugins_for("linux-x86_64") == []
    filenames = {s.filename for _, s in plan.all_sources()}
    assert len(filenames) == 11  # 3 x86-64 wheel pairs, 2 Arm pairs, macOS, the npm AAR
    qnn = load_plan(Project.at(ROOT), BuildOptions(product="darkroom-qnn"))
    assert qnn.product.runtimes_for("android-arm64-v8a") == ("android-qnn", "android-generic")
    assert qnn.product.runtimes_for("android-x86_64") == ("android-generic",)


def edited_recipe(tmp_path: Path, old: str, new: str) -> Path:
    text = (ROOT / "recipes/webgpu.toml").read_text()
    assert old in text
    path = tmp_path / "webgpu.toml"
    path.write_text(text.replace(old, new))
    return path


def test_bad_pin_is_reported_with_the_file(tmp_path: Path) -> None:
    path = edited_recipe(
        tmp_path, "142eb8bdb803c58117bf64164d201f43180bc87229cac14b590aa4ea79e0f70b", "not-a-hash"
    )
    with pytest.raises(ConfigError) as err:
        load_recipe(path)
    assert "`sha256`: 'not-a-hash' is not 64 hex digits" in str(err.value)
    assert "[sources.ort-linux]" in str(err.value)
    assert str(path) in str(err.value)


def test_unknown_source_in_take(tmp_path: Path) -> None:
    path = edited_recipe(tmp_path, 'source = "ort-linux"\nlibraries', 'source = "nope"\nlibraries')
    with pytest.raises(ConfigError, match="unknown source 'nope'"):
        load_recipe(path)


def test_invalid_toml(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("[component\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_recipe(path)


def test_invoke_list_explains_each_task() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "invoke", "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in ("build", "fetch", "clean", "test"):
        assert f"  {name} " in out


def test_build_task_exit_code_names_the_failure(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "invoke", "build", "--product", "no-such-product"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == ConfigError.exit_code
    assert "no-such-product.toml does not exist" in result.stderr + result.stdout


def test_no_registry_host_is_written_in_the_repository() -> None:
    """Hosts come from configuration; the code and data name none."""
    pip_index = __import__("pip._internal.models.index", fromlist=["PyPI"]).PyPI
    hosts = {pip_index.netloc, pip_index.file_storage_domain}
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the repository's git checkout (Debian: apt-get install git)")
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    texts = [
        ROOT / name
        for name in tracked
        if name and (ROOT / name).is_file() and (ROOT / name).suffix in TEXT_SUFFIXES
    ]
    assert ROOT / "tasks.py" in texts and len(texts) > 100, f"only {len(texts)} files read"
    named = [
        f"{path.relative_to(ROOT)} names {host}"
        for path in texts
        for host in hosts
        if host in path.read_text(errors="replace")
    ]
    assert named == []
