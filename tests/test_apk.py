"""The apk tier: the runtime-loader module read by Android's own tools (Debian's aapt, aapt2,
zipalign, apksigner, framework-res) and by our own zip reader.

From the real-tier build of the default product (its Android targets, from the real pinned AAR)
and from the QNN product's module (the synthetic AARs the Android tests serve from a Maven
repository and an npm registry on 127.0.0.1), a host APK is assembled, aligned with the
build's own zipalign advice, signed with a throwaway key and verified; then every claim the
module makes about that APK is checked against the bytes: 16 KB-aligned STORED libraries,
the signature, the ABIs and minSdk aapt reads, the index, payload and models at the paths
RuntimeLoader opens (run on the JVM against the APK's assets), and the size report.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ortbundle._core.overrides import BUILTIN_DIR
from ortbundle._core.progress import plain_reporter
from ortbundle.channels.apk import NO_COMPRESS, aligned_apk_command
from ortbundle.pipeline.build import DEFAULT_PRODUCT, BuildOptions, Project, build
from ortbundle.pipeline.result import BuildResult
from ortbundle.stage.binaries.loadable import android_api_level
from tests.helpers.android import AndroidProject
from tests.helpers.apk import PAGE, Assembled, Tools, assemble, badging, find_tools
from tests.helpers.bite import each
from tests.helpers.maven_server import MavenServer
from tests.helpers.npm_server import NpmServer
from tests.helpers.real import ROOT
from tests.helpers.zipread import STORED, ZipEntry, read_data, read_entries
from tests.test_channel_apk import STUBS

pytestmark = pytest.mark.apk

ANDROID_TARGETS = ("android-arm64-v8a", "android-x86_64")
JSON_JAR = Path("/usr/share/java/com.android.json.jar")  # Android's org.json, as Debian ships it


@dataclass(frozen=True)
class Built:
    name: str
    result: BuildResult
    tools: Tools
    apk: Assembled
    entries: dict[str, ZipEntry]

    @property
    def channel(self) -> Path:
        return self.result.version_dir / "packaging/apk"

    @property
    def module(self) -> Path:
        return self.channel / "runtime-loader"

    def read(self, name: str) -> bytes:
        return read_data(self.apk.signed, self.entries[name])


def _default_product(tmp: Path) -> BuildResult:
    """The default product's Android targets from the real pinned artifacts (the real tier)."""
    options = BuildOptions(product=DEFAULT_PRODUCT, targets=ANDROID_TARGETS)
    return build(Project.at(ROOT, tmp / "dist"), options, plain_reporter())


def _qnn_product(tmp: Path, templates: dict[str, str] | None = None) -> BuildResult:
    """The QNN product's shape (QNN runtime with Hexagon Skels on arm64, the generic one on
    both ABIs) from synthetic AARs served by local Maven and npm registries; `templates`: the
    project's replacements (name under templates/ -> text)."""
    with ExitStack() as stack:
        maven = stack.enter_context(MavenServer().running())
        npm = stack.enter_context(NpmServer().running())
        environ = {"ORTBUNDLE_MAVEN_URL": maven.url, "ORTBUNDLE_NPM_REGISTRY": npm.url}
        android = AndroidProject(tmp / "project", with_qnn=True, environ_extra=environ).write()
        for name, text in (templates or {}).items():
            (android.root / "templates" / name).parent.mkdir(parents=True, exist_ok=True)
            (android.root / "templates" / name).write_text(text, "utf-8")
        npm.add("fake-onnxruntime", "1.0.0", android.artifacts["stock.tgz"])
        for group, artifact, version in (
            ("com.example.ort", "onnxruntime-android-qnn", "1.0.0"),
            ("com.example.qti", "qnn-runtime", "2.0.0"),
        ):
            data = android.artifacts[f"{artifact}-{version}.aar"]
            maven.add(group, artifact, version, data)
        return build(android.project, android.options(), plain_reporter())


@pytest.fixture(
    scope="module",
    params=[pytest.param("default", marks=pytest.mark.real), pytest.param("qnn")],
)
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Built:
    tools = find_tools()
    tmp = tmp_path_factory.mktemp(f"apk-{request.param}")
    make = _default_product if request.param == "default" else _qnn_product
    result = make(tmp)
    apk = assemble(result.version_dir / "packaging/apk/runtime-loader", tmp / "apk", tools)
    return Built(request.param, result, tools, apk, read_entries(apk.signed))


def _abis(built: Built) -> list[str]:
    """The ABIs the build packaged, from its stages (not from the module it wrote)."""
    return sorted(t.target.removeprefix("android-") for t in built.result.targets)


def _libraries(built: Built, abi: str) -> dict[str, ZipEntry]:
    prefix = f"lib/{abi}/"
    return {n.removeprefix(prefix): e for n, e in built.entries.items() if n.startswith(prefix)}


def _models(built: Built, abi: str) -> list[dict[str, Any]]:
    """The models the ABI's models.json lists (a product without models has none)."""
    name = f"assets/ortbundle/{abi}/models.json"
    models: list[dict[str, Any]] = (
        json.loads(built.read(name))["models"] if name in built.entries else []
    )
    return models


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- alignment ---------------------------------------------------------------------------------


def test_every_library_is_stored_at_a_16k_offset_with_the_modules_bytes(built: Built) -> None:
    assert {n.split("/")[1] for n in built.entries if n.startswith("lib/")} == set(_abis(built))
    for abi in _abis(built):
        libraries = _libraries(built, abi)
        module = built.module / "src/main/jniLibs" / abi
        assert set(libraries) == {p.name for p in module.glob("*.so")}
        for name, entry in libraries.items():
            assert entry.method == STORED, name
            assert entry.data_offset % PAGE == 0, (name, hex(entry.data_offset))
            assert built.read(entry.name) == (module / name).read_bytes(), name


def test_zipalign_agrees_and_a_4k_page_aligned_apk_fails_both_checks(
    built: Built, tmp_path: Path
) -> None:
    tools = built.tools
    checked = tools.run("zipalign", "-c", "-v", str(PAGE), str(built.apk.signed), check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Verification successful" in checked.stdout
    # the negative control: libraries page-aligned for 4 KB pages only
    four_k = tmp_path / "4k.apk"
    tools.run("zipalign", "-f", "-p", "4", str(built.apk.unaligned), str(four_k))
    refused = tools.run("zipalign", "-c", "-v", str(PAGE), str(four_k), check=False)
    assert refused.returncode != 0, refused.stdout
    misaligned = [
        e.name
        for e in read_entries(four_k).values()
        if e.name.startswith("lib/") and e.data_offset % PAGE
    ]
    assert misaligned, "with -p 4 some library should start off a 16 KB boundary"
    assert all(f"{name} (BAD" in refused.stdout for name in misaligned), refused.stdout


def test_the_printed_advice_is_what_works_here(built: Built, tmp_path: Path) -> None:
    """The build's note gives the zipalign command the APK was aligned with (tests/helpers/apk.py
    runs exactly it); the -P form it mentions needs newer build-tools than Debian's."""
    notes = "\n".join(n for c in built.result.packages if c.channel == "apk" for n in c.notes)
    assert aligned_apk_command("unaligned.apk", "aligned.apk") in notes
    assert "build-tools 35.0.0-rc3 and later" in notes
    old = built.tools.run(
        "zipalign", "-P", "16", "-f", "4", str(built.apk.unaligned), str(tmp_path / "p.apk"),
        check=False,
    )  # fmt: skip
    if old.returncode != 0:  # Debian's zipalign 10: the -P advice alone would have failed
        assert "-P" in old.stdout + old.stderr


# --- signature and what aapt reads ------------------------------------------------------------


def test_the_signature_verifies_and_a_changed_byte_breaks_it(built: Built, tmp_path: Path) -> None:
    verified = built.tools.run("apksigner", "verify", "-v", str(built.apk.signed))
    assert "Verified using v2 scheme (APK Signature Scheme v2): true" in verified.stdout
    assert "Number of signers: 1" in verified.stdout
    tampered = tmp_path / "tampered.apk"
    shutil.copyfile(built.apk.signed, tampered)
    entry = next(e for n, e in built.entries.items() if n.startswith("lib/"))
    with tampered.open("r+b") as stream:
        stream.seek(entry.data_offset + entry.compressed_size // 2)
        byte = stream.read(1)
        stream.seek(-1, 1)
        stream.write(bytes([byte[0] ^ 0xFF]))
    broken = built.tools.run("apksigner", "verify", str(tampered), check=False)
    assert broken.returncode != 0, broken.stdout


def test_aapt_reads_exactly_the_built_abis_and_a_min_sdk_the_libraries_allow(
    built: Built, tmp_path: Path
) -> None:
    fields = badging(built.tools, built.apk.signed)
    assert fields["native-code"] == _abis(built)
    assert fields["sdkVersion"] == [str(built.apk.min_sdk)]
    levels = {}
    for abi in _abis(built):
        for name, entry in _libraries(built, abi).items():
            copy = tmp_path / f"{abi}-{name}"
            copy.write_bytes(built.read(entry.name))
            levels[f"{abi}/{name}"] = android_api_level(copy)
    noted = {name: level for name, level in levels.items() if level is not None}
    if built.name == "default":  # the real NDK-built libraries carry the note
        assert set(noted) == set(levels)
    if noted:  # minSdk is the API level the libraries were built for: no lower, no higher
        assert max(noted.values()) == built.apk.min_sdk, noted


# --- the index, the payload and the models, where RuntimeLoader opens them --------------------


def test_every_index_payload_and_model_is_in_the_apk_where_the_loader_looks(built: Built) -> None:
    models_seen = 0
    for abi in _abis(built):
        index_name = f"assets/ortbundle/{abi}/runtimes.json"
        raw = built.read(index_name)
        assert raw == (built.module / "src/main" / index_name).read_bytes()
        index = json.loads(raw)
        assert index["layout"] == "apk" and index["target"] == f"android-{abi}"
        libraries = _libraries(built, abi)
        for runtime in index["runtimes"]:
            assert runtime["entry"] in libraries, (abi, runtime["entry"])
            for file in runtime["files"]:
                if file["path"].startswith("assets/"):  # copied out by RuntimeLoader
                    rest = file["path"].removeprefix("assets/")
                    data = built.read(f"assets/ortbundle/{abi}/{runtime['name']}/{rest}")
                else:  # loaded from the APK by the linker
                    data = built.read(f"lib/{abi}/{Path(file['path']).name}")
                assert (len(data), _sha256(data)) == (file["size"], file["sha256"]), file
        for model in _models(built, abi):
            for form in model["forms"]:
                entry = built.entries[f"assets/ortbundle/{form['path']}"]  # the bundle root
                assert entry.method == STORED, entry.name  # noCompress: openFd maps it
                data = built.read(entry.name)
                assert (len(data), _sha256(data)) == (form["size"], form["sha256"])
                models_seen += 1
    if built.name == "default":
        assert models_seen == 2 * len(_abis(built))  # sigmoid and logreg-iris, per ABI


# The fake device: RuntimeLoader reads the APK's assets through the AssetManager stub, org.json
# is Android's own (Debian's libandroid-json-java), the runtimes' entry libraries are host
# stand-ins. Prints what it chose and, for every form models.json names, the SHA-256 of what
# RuntimeLoader.modelAsset(path) opens.
APK_MAIN = """
import android.content.Context;
import android.content.pm.ApplicationInfo;
import android.content.res.AssetManager;
import android.os.Build;
import java.io.*;
import java.security.MessageDigest;
import org.json.*;
import %(package)s.RuntimeLoader;

public class Main {
    public static void main(String[] args) throws Exception {
        final AssetManager assets = new AssetManager(new File(args[0]));
        final File files = new File(args[1]);
        final ApplicationInfo info = new ApplicationInfo();
        info.nativeLibraryDir = "/data/app/host/lib/" + args[2];
        Build.SOC_MANUFACTURER = args[3];
        Build.SOC_MODEL = args[4];
        Context context = new Context() {
            public AssetManager getAssets() { return assets; }
            public File getFilesDir() { return files; }
            public ApplicationInfo getApplicationInfo() { return info; }
        };
        RuntimeLoader.Result result = RuntimeLoader.load(context);
        System.out.println("runtime=" + result.runtime);
        System.out.println("abi=" + result.abi);
        for (String skipped : result.skipped) System.out.println("skipped=" + skipped);
        JSONObject models;
        try {
            models = new JSONObject(new String(read(
                    assets.open("ortbundle/" + result.abi + "/models.json")), "UTF-8"));
        } catch (FileNotFoundException e) {
            return; // a product without models
        }
        JSONArray list = models.getJSONArray("models");
        for (int i = 0; i < list.length(); i++) {
            JSONArray forms = list.getJSONObject(i).getJSONArray("forms");
            for (int j = 0; j < forms.length(); j++) {
                String path = forms.getJSONObject(j).getString("path");
                byte[] data = read(assets.open(RuntimeLoader.modelAsset(path)));
                StringBuilder hex = new StringBuilder();
                for (byte b : MessageDigest.getInstance("SHA-256").digest(data))
                    hex.append(String.format("%%02x", b & 0xff));
                System.out.println("model=" + path + " " + hex);
            }
        }
    }

    static byte[] read(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] buffer = new byte[1 << 14];
        for (int n; (n = in.read(buffer)) != -1; ) out.write(buffer, 0, n);
        in.close();
        return out.toByteArray();
    }
}
"""


@pytest.fixture(scope="module")
def jvm(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """RuntimeLoader from the module and APK_MAIN, compiled against the Android stubs and
    Debian's org.json; the APK's assets extracted by our reader, entry for entry."""
    javac, java, gcc = (shutil.which(t) for t in ("javac", "java", "gcc"))
    if javac is None or java is None or gcc is None or not JSON_JAR.is_file():
        pytest.skip("needs a JDK, gcc and Android's org.json (apt install default-jdk-headless "
                    "gcc libandroid-json-java)")  # fmt: skip
    root = tmp_path_factory.mktemp(f"jvm-{built.name}")
    sources = []
    for relative, text in STUBS.items():
        if not relative.startswith("org/json/"):  # the real one, from the jar
            (root / "src" / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / "src" / relative).write_text(text, "utf-8")
            sources.append(str(root / "src" / relative))
    java_file = next((built.module / "src/main/java").rglob("RuntimeLoader.java"))
    package = java_file.read_text("utf-8").split(";", 1)[0].removeprefix("package ")
    (root / "src/Main.java").write_text(APK_MAIN % {"package": package}, "utf-8")
    subprocess.run(
        [javac, "--release", "8", "-nowarn", "-encoding", "UTF-8", "-d", str(root / "classes"),
         "-cp", str(JSON_JAR), *sources, str(java_file), str(root / "src/Main.java")],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    assets = root / "assets"
    for name in built.entries:
        if name.startswith("assets/") and not name.endswith("/"):
            dest = assets / name.removeprefix("assets/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(built.read(name))
    stand_ins = root / "libs"
    stand_ins.mkdir()
    (root / "empty.c").write_text("int ortbundle_stand_in(void) { return 0; }\n", "utf-8")
    names = {"libcdsprpc.so"} | {
        r["entry"]
        for abi in _abis(built)
        for r in json.loads(built.read(f"assets/ortbundle/{abi}/runtimes.json"))["runtimes"]
    }
    for name in sorted(names):
        subprocess.run(
            [gcc, "-shared", "-fPIC", "-o", str(stand_ins / name), str(root / "empty.c")],
            check=True, timeout=120,
        )  # fmt: skip
    yield root, assets


def test_runtime_loader_finds_its_index_payload_and_models_in_the_apk(
    built: Built, jvm: tuple[Path, Path], tmp_path: Path
) -> None:
    root, assets = jvm
    java = shutil.which("java")
    assert java is not None
    for abi, isa in (("arm64-v8a", "arm64"), ("x86_64", "x86_64")):
        if abi not in _abis(built):
            continue
        files = tmp_path / abi
        done = subprocess.run(
            [java, f"-Djava.library.path={root / 'libs'}", "-cp",
             f"{root / 'classes'}:{JSON_JAR}", "Main", str(assets), str(files), isa, "QTI",
             "SM8650"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        index = json.loads(built.read(f"assets/ortbundle/{abi}/runtimes.json"))
        first = index["runtimes"][0]
        assert f"runtime={first['name']}" in lines and f"abi={abi}" in lines, lines
        assert not [line for line in lines if line.startswith("skipped=")], lines
        payload = [f for f in first["files"] if f["path"].startswith("assets/")]
        for file in payload:  # copied out of the APK's assets and checked against the index
            copies = list(files.glob(f"ortbundle/*/{first['name']}/{file['path'][7:]}"))
            assert len(copies) == 1 and _sha256(copies[0].read_bytes()) == file["sha256"]
        if built.name == "qnn" and abi == "arm64-v8a":
            assert first["name"] == "qnn" and payload, "the Skels come out of the APK"
        wanted = {
            f"model={form['path']} {form['sha256']}"
            for model in _models(built, abi)
            for form in model["forms"]
        }
        assert {line for line in lines if line.startswith("model=")} == wanted


# --- a project's own manifest template --------------------------------------------------------

META = '        <meta-data android:name="com.acme.runtimes" android:value="ortbundle" />'


def test_a_project_manifest_template_is_what_the_apk_carries(tmp_path: Path) -> None:
    """A project's apk/AndroidManifest.xml.j2 (here: one <meta-data> more in <application>) is
    the module's manifest, merged into an app that aapt2 links and aapt reads back."""
    tools = find_tools()
    builtin = (BUILTIN_DIR / "apk/AndroidManifest.xml.j2").read_text("utf-8")
    assert builtin.count("    <application>\n") == 1
    replaced = builtin.replace("    <application>\n", f"    <application>\n{META}\n")
    result = _qnn_product(tmp_path, {"apk/AndroidManifest.xml.j2": replaced})
    module = result.version_dir / "packaging/apk/runtime-loader"
    assert META in (module / "src/main/AndroidManifest.xml").read_text("utf-8")
    apk = assemble(module, tmp_path / "apk", tools)
    tree = tools.run("aapt", "dump", "xmltree", str(apk.signed), "AndroidManifest.xml").stdout
    meta = tree.split("E: meta-data", 1)[1].split("E: ", 1)[0]
    assert '"com.acme.runtimes"' in meta and '"ortbundle"' in meta, tree
    assert "E: uses-native-library" in tree  # the built-in part is still rendered


# --- the size report ---------------------------------------------------------------------------


def _round(size: int) -> int:
    return -(-size // PAGE) * PAGE


def test_the_size_report_is_what_the_apk_stores(built: Built) -> None:
    for abi in each(_abis(built), "ABIs"):
        report = json.loads((built.channel / f"size-report.{abi}.json").read_text("utf-8"))
        index = json.loads(built.read(f"assets/ortbundle/{abi}/runtimes.json"))
        libraries = _libraries(built, abi)
        for runtime in report["runtimes"]:
            (listed,) = (r for r in index["runtimes"] if r["name"] == runtime["name"])
            names = {Path(f["path"]).name for f in listed["files"] if "/" not in f["path"]}
            stored = [libraries[n] for n in sorted(names)]
            assert runtime["library_bytes"] == sum(e.compressed_size for e in stored)
            assert runtime["library_apk_bytes"] == sum(_round(e.compressed_size) for e in stored)
            prefix = f"assets/ortbundle/{abi}/{runtime['name']}/"
            assets = [e for n, e in built.entries.items() if n.startswith(prefix)]
            assert runtime["asset_bytes"] == sum(e.size for e in assets)
        # this ABI's own entries, and the shared ones (licences, models) its stage ships
        stage = built.result.version_dir / f"android-{abi}"
        shared = {
            f"assets/ortbundle/{p.relative_to(stage).as_posix()}"
            for top in ("licenses", "models")
            for p in (stage / top).rglob("*")
            if p.is_file()
        }
        ours = [
            e
            for n, e in built.entries.items()
            if n.startswith((f"lib/{abi}/", f"assets/ortbundle/{abi}/")) or n in shared
        ]
        total = report["total"]
        assert total["files"] == len(ours)
        in_lib = [e for e in ours if e.name.startswith("lib/")]
        assert total["library_bytes"] == sum(e.compressed_size for e in in_lib)
        assert total["library_apk_bytes"] == sum(_round(e.compressed_size) for e in in_lib)
        assets = [e for e in ours if not e.name.startswith("lib/")]
        assert total["asset_bytes"] == sum(e.size for e in assets)
        # exact where the APK stores them as they are, an upper bound where it deflates them
        for entry in assets:
            if entry.method == STORED:
                assert entry.compressed_size == entry.size
            assert entry.compressed_size <= entry.size or entry.size < 64, entry.name
        models = [e for e in assets if e.name.startswith("assets/ortbundle/models/")]
        assert all(e.method == STORED for e in models) and all(
            e.name.endswith(tuple(f".{x}" for x in NO_COMPRESS)) for e in models
        )
        assert report["models"]["apk_bytes"] == sum(e.compressed_size for e in models)
