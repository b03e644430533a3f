"""Models as components: gated from the file, staged, indexed in models.json, audited."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ortbundle._core.errors import ArchiveError, BinaryError, ConfigError, IntegrityError
from ortbundle._core.progress import Reporter
from ortbundle.config.model_recipes import load_model_recipe
from ortbundle.config.plan import load_plan
from ortbundle.config.project import BuildOptions, Project
from ortbundle.pipeline.build import build
from tests.helpers.onnx_models import detector
from tests.helpers.project import FakeProject
from tests.helpers.toml_edit import edit_toml, set_key

MEMBER = "onnxruntime/models/yolo.onnx"
DERIVED = "onnxruntime/models/yolo-a8w8.onnx"
LABELS = "onnxruntime/models/labels.txt"
REPO_MANIFESTS = Path(__file__).resolve().parents[1] / "manifests"


def model_recipe(
    sha: str,
    derived_sha: str,
    *,
    min_opset: int = 13,
    expression: str = "AGPL-3.0-only",
    backends: str = '["fake"]',
) -> str:
    return f"""
[component]
name = "yolo"
kind = "model"
version = "11.0"
label = "YOLO detector"
description = "A synthetic Ultralytics-like detector"

[sources.linux]
pypi = {{ project = "onnxruntime-fake", version = "1.0.0", filename = "onnxruntime_fake-1.0.0-cp311-cp311-manylinux_2_28_x86_64.whl" }}
sha256 = "{{linux_pin}}"

[license]
expression = "{expression}"
texts = [{{ source = "linux", member = "onnxruntime/LICENSE" }}]

[[forms]]
name = "f32"
canonical = true
source = "linux"
member = "{MEMBER}"
sha256 = "{sha}"
backends = {backends}
sidecars = [{{ member = "{LABELS}", name = "labels.txt" }}]

[forms.gate]
min_ir_version = 7
min_opset = {min_opset}
inputs = [{{ name = "images", type = "FLOAT", shape = [1, 3, "height", "width"] }}]
outputs = [{{ name = "output0", type = "FLOAT", shape = [1, 300, 6] }}]
metadata = {{ task = "detect", names = true }}

[[forms]]
name = "a8w8"
derived_from = "f32"
source = "linux"
member = "{DERIVED}"
sha256 = "{derived_sha}"
backends = {backends}
"""


def with_model(
    fake: FakeProject, f32: bytes, *, recipe_sha: str | None = None, **kwargs: object
) -> FakeProject:
    fake.linux[MEMBER] = f32
    fake.linux[DERIVED] = detector(opset=13, weights=256)
    fake.linux[LABELS] = b"person\nbicycle\n"
    fake.product_extra = ""
    fake.write()
    text = model_recipe(
        recipe_sha or _sha(f32),
        _sha(fake.linux[DERIVED]),
        **kwargs,  # type: ignore[arg-type]
    ).replace("{linux_pin}", fake.pin("linux-x86_64"))
    (fake.root / "recipes" / "yolo.toml").write_text(text)
    manifest = fake.root / "manifests" / "fakeproduct.toml"
    set_key(manifest, "product.models", ["yolo"])
    return fake


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_a_model_is_gated_staged_indexed_and_audited(fake: FakeProject, reporter: Reporter) -> None:
    with_model(fake, detector(opset=17))
    result = build(fake.project, fake.options(), reporter)
    for target in result.targets:
        stage = target.stage
        assert (stage / "models/yolo/f32.onnx").read_bytes() == fake.linux[MEMBER]
        assert (stage / "models/yolo/f32.labels.txt").read_bytes() == b"person\nbicycle\n"
        index = json.loads((stage / "models.json").read_text())
        assert index["schema"] == "ortbundle.models/1"
        (yolo,) = index["models"]
        assert yolo["canonical"] == "f32" and yolo["backends"] == {"fake": "f32"}
        f32, a8w8 = yolo["forms"]
        assert f32["identity"].startswith("yolo@f32:sha256:")
        assert f32["inputs"] == [
            {"name": "images", "type": "tensor(float)", "shape": [1, 3, "height", "width"]}
        ]
        assert f32["metadata"]["task"] == "detect" and "names" in f32["metadata"]
        assert f32["opsets"] == {"ai.onnx": 17}
        assert a8w8["derived_from"] == "f32" and a8w8["identity"] != f32["identity"]
        component = target.licensing.owner("models/yolo/f32.onnx")
        assert (component.name, component.expression) == ("yolo", "AGPL-3.0-only")
        assert target.licensing.owner("models.json").name == "ortbundle"
        assert "yolo 11.0\nLicence: AGPL-3.0-only" in (stage / "NOTICE").read_text()
    # weights under a strong copyleft licence need a person's review on every channel
    arch = next(a for a in result.audits if a.channel == "arch")
    yolo_audit = next(c for c in arch.components if c.name == "yolo")
    assert (yolo_audit.verdict, yolo_audit.status) == ("review", "review")


def test_opset_11_is_refused_where_13_is_required(fake: FakeProject, reporter: Reporter) -> None:
    with_model(fake, detector(opset=11))
    with pytest.raises(BinaryError) as caught:
        build(fake.project, fake.options(), reporter)
    message = str(caught.value)
    assert "yolo" in message and "f32" in message and "opset" in message and "13" in message
    assert not (fake.root / "dist" / "fakeproduct" / "1.2.3").exists()


def test_a_model_whose_bytes_differ_from_the_pin_is_refused(
    fake: FakeProject, reporter: Reporter
) -> None:
    with_model(fake, detector(opset=17), recipe_sha="0" * 64)
    with pytest.raises(IntegrityError, match="the recipe pins 0000"):
        build(fake.project, fake.options(), reporter)


def test_a_backend_the_product_lacks_is_refused(fake: FakeProject, reporter: Reporter) -> None:
    with_model(fake, detector(opset=17), backends='["fake", "cuda"]')
    with pytest.raises(ConfigError, match="backends that are no runtime: cuda"):
        build(fake.project, fake.options(), reporter)


def test_a_target_no_form_serves_is_refused_before_any_download(
    fake: FakeProject, reporter: Reporter
) -> None:
    """A model ships on every target: one whose forms name no runtime of a target would be
    staged there with `"backends": {}` (issue #43, macOS). The build names model and target."""
    with_model(fake, detector(opset=17), backends='["fake"]')
    recipes = fake.root / "recipes"
    text = (recipes / "fake.toml").read_text().replace('name = "fake"', 'name = "fakewin"', 1)
    (recipes / "fakewin.toml").write_text(text)
    manifest = fake.root / "manifests" / "fakeproduct.toml"
    set_key(manifest, "product.runtimes", ["fake", "fakewin"])
    with manifest.open("a") as out:
        out.write('\n[runtime.fake]\ntargets = ["linux-x86_64"]\n')
        out.write('\n[runtime.fakewin]\ntargets = ["windows-x86_64"]\n')
    with pytest.raises(ConfigError) as caught:
        build(fake.project, fake.options(), reporter)
    error = caught.value
    assert (error.component, error.target) == ("yolo", "windows-x86_64"), str(error)
    assert error.message.startswith(
        "model yolo cannot be served on windows-x86_64: no form names a runtime of that "
        "target (fakewin); its forms name fake"
    ), error.message
    assert "add fakewin to the backends" in str(error.fix)
    assert not (fake.root / "cache").exists() or not any((fake.root / "cache").rglob("*.whl"))


@pytest.mark.parametrize("product", sorted(p.stem for p in REPO_MANIFESTS.glob("*.toml")))
def test_every_shipped_model_serves_every_target(product: str, tmp_path: Path) -> None:
    """The repository's products: each model names a runtime of each target (the model
    recipes named android-qnn for macOS, which ships stock-macos)."""
    plan = load_plan(
        Project(REPO_MANIFESTS.parent, tmp_path / "dist"), BuildOptions(product=product)
    )
    unserved = [
        (model.name, target)
        for model in plan.models.values()
        for target in plan.targets
        if not {b for f in model.forms for b in f.backends} & set(plan.product.runtimes_for(target))
    ]
    assert plan.targets and unserved == []


def test_model_recipe_rules(tmp_path: Path) -> None:
    from ortbundle.config.model_recipes import load_model_recipe

    path = tmp_path / "yolo.toml"
    text = model_recipe("a" * 64, "b" * 64).replace("{linux_pin}", "c" * 64)
    path.write_text(text.replace("canonical = true\n", ""))
    with pytest.raises(ConfigError, match="exactly one form must be canonical"):
        load_model_recipe(path)
    path.write_text(text.replace('derived_from = "f32"', 'derived_from = "nope"'))
    with pytest.raises(ConfigError, match="derived_from must name another form"):
        load_model_recipe(path)


# --- models from the project itself and from a plain URL ---------------------------------

OWN_RECIPE = """
[component]
name = "own"
kind = "model"
version = "2.0"
description = "A model the team trained, with a quantised form published on a web server"

[sources.checkout]
path = "models/own.onnx"
sha256 = "{own_sha}"

[sources.web]
url = "{url}"
sha256 = "{web_sha}"

[license]
expression = "MIT"
texts = [{{ file = "own/LICENSE" }}]

[[forms]]
name = "f32"
canonical = true
source = "checkout"
sha256 = "{own_sha}"
backends = ["fake"]

[forms.gate]
min_opset = 13

[[forms]]
name = "a8w8"
derived_from = "f32"
source = "web"
sha256 = "{web_sha}"
backends = ["fake"]
"""


@pytest.fixture
def web(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A plain web server on 127.0.0.1 serving a directory."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(QuietHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def with_own_model(fake: FakeProject, web: tuple[str, Path]) -> tuple[bytes, bytes]:
    fake.write()
    own, quantised = detector(opset=17), detector(opset=13, weights=64)
    (fake.root / "models").mkdir()
    (fake.root / "models/own.onnx").write_bytes(own)
    (fake.root / "licenses/own").mkdir(parents=True)
    (fake.root / "licenses/own/LICENSE").write_text("MIT License\n\nCopyright (c) The Team\n")
    base, root = web
    (root / "own-a8w8.onnx").write_bytes(quantised)
    (fake.root / "recipes/own.toml").write_text(
        OWN_RECIPE.format(own_sha=_sha(own), web_sha=_sha(quantised), url=f"{base}/own-a8w8.onnx")
    )
    manifest = fake.root / "manifests/fakeproduct.toml"
    set_key(manifest, "product.models", ["own"])
    return own, quantised


def test_a_model_from_the_project_and_one_from_a_url_are_staged(
    fake: FakeProject, reporter: Reporter, web: tuple[str, Path]
) -> None:
    own, quantised = with_own_model(fake, web)
    result = build(fake.project, fake.options(), reporter)
    for target in result.targets:
        assert (target.stage / "models/own/f32.onnx").read_bytes() == own
        assert (target.stage / "models/own/a8w8.onnx").read_bytes() == quantised
        assert target.licensing.owner("models/own/a8w8.onnx").name == "own"
    manifest = json.loads((result.version_dir / "manifest.json").read_text())
    inputs = {i["kind"]: i for i in manifest["inputs"] if i["component"] == "own"}
    assert inputs["path"]["path"] == "models/own.onnx"
    assert inputs["url"]["url"] == f"{web[0]}/own-a8w8.onnx"


def test_a_changed_project_model_is_refused(
    fake: FakeProject, reporter: Reporter, web: tuple[str, Path]
) -> None:
    with_own_model(fake, web)
    (fake.root / "models/own.onnx").write_bytes(detector(opset=18))
    with pytest.raises(IntegrityError, match="local source models/own.onnx has sha256"):
        build(fake.project, fake.options(), reporter)
    assert not (fake.root / "dist").exists() or not any((fake.root / "dist").rglob("*.onnx"))


def test_a_member_of_a_bare_file_source_is_a_clear_error(
    fake: FakeProject, reporter: Reporter, web: tuple[str, Path]
) -> None:
    with_own_model(fake, web)
    recipe = fake.root / "recipes/own.toml"
    edit_toml(recipe, lambda doc: doc["forms"][1].update(member="inner.onnx"))
    with pytest.raises(ArchiveError, match="is not an archive, so it has no member 'inner.onnx'"):
        build(fake.project, fake.options(), reporter)


def test_a_project_model_that_is_a_link_out_of_the_project_is_refused(
    fake: FakeProject, reporter: Reporter, web: tuple[str, Path], tmp_path: Path
) -> None:
    own, _ = with_own_model(fake, web)
    outside = tmp_path / "outside.onnx"
    outside.write_bytes(own)
    (fake.root / "models/own.onnx").unlink()
    (fake.root / "models/own.onnx").symlink_to(outside)
    with pytest.raises(
        ConfigError, match="models/own.onnx is a link to .*outside.onnx, outside the project"
    ):
        build(fake.project, fake.options(), reporter)


@pytest.mark.parametrize(
    "url", ["https://user:secret@example.invalid/m.onnx", "https://example.invalid/m.onnx?sig=x"]
)
def test_a_url_source_carries_no_credentials(
    fake: FakeProject, web: tuple[str, Path], url: str
) -> None:
    with_own_model(fake, web)
    recipe = fake.root / "recipes/own.toml"
    edit_toml(recipe, lambda doc: doc["sources"]["web"].update(url=url))
    with pytest.raises(ConfigError, match="no credentials or query") as failed:
        load_model_recipe(recipe)
    assert "secret" not in str(failed.value)
