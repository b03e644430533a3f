"""Assemble a host APK around the apk channel's runtime-loader module with Debian's Android tools
(aapt2, zipalign, apksigner, keytool, framework-res.apk), as a script that builds an APK without
Gradle would: the module's <application> children merged into a host manifest, `aapt2 link`
with the module's assets, the libraries added STORED as lib/<abi>/*.so, the build's own
zipalign advice, a throwaway key, `apksigner sign`. There is no android.jar, d8 or emulator here:
the APK carries no code and nothing runs it; what can be checked is checked by the tests."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from ortbundle.channels.apk import NO_COMPRESS, aligned_apk_command

ANDROID_NS = "http://schemas.android.com/apk/res/android"
FRAMEWORK_RES = Path("/usr/share/android-framework-res/framework-res.apk")
# tool -> the Debian package that installs it
TOOLS = {
    "aapt": "aapt",
    "aapt2": "aapt",
    "zipalign": "zipalign",
    "apksigner": "apksigner",
    "keytool": "default-jdk-headless",
}
PAGE = 16384
_TIMEOUT = 300
_PASSWORD = "ortbundle-test"  # a throwaway key for a throwaway APK


@dataclass(frozen=True)
class Tools:
    paths: dict[str, str]
    framework_res: Path

    def run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [self.paths[tool], *args], capture_output=True, text=True, timeout=_TIMEOUT, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{tool} {shlex.join(args)} failed:\n{done.stdout}{done.stderr}")
        return done


def find_tools() -> Tools:
    """The tools, or a skip naming the Debian packages that are missing."""
    paths = {tool: shutil.which(tool) for tool in TOOLS}
    missing = sorted({TOOLS[t] for t, p in paths.items() if p is None})
    if not FRAMEWORK_RES.is_file():
        missing.append("android-framework-res")
    if missing:
        pytest.skip(f"Android tools missing (Debian/Ubuntu: apt install {' '.join(missing)})")
    return Tools({t: str(p) for t, p in paths.items()}, FRAMEWORK_RES)


@dataclass(frozen=True)
class Assembled:
    unaligned: Path  # aapt2's output with the libraries added, before zipalign
    signed: Path  # aligned, then signed: the APK
    abis: tuple[str, ...]
    min_sdk: int


def module_min_sdk(module: Path) -> int:
    """The minSdk the module's build.gradle.kts declares."""
    found = re.search(r"^\s*minSdk = (\d+)$", (module / "build.gradle.kts").read_text(), re.M)
    assert found, "build.gradle.kts declares no minSdk"
    return int(found.group(1))


def host_manifest(module: Path, package: str, min_sdk: int) -> bytes:
    """A host app's manifest with the module's <application> children merged in (what the
    Gradle manifest merger does for a library's application elements)."""
    ET.register_namespace("android", ANDROID_NS)
    library = ET.parse(module / "src/main/AndroidManifest.xml").getroot()
    root = ET.Element("manifest", {"package": package})
    root.set(f"{{{ANDROID_NS}}}versionCode", "1")
    root.set(f"{{{ANDROID_NS}}}versionName", "1.0")
    sdk = ET.SubElement(root, "uses-sdk")
    sdk.set(f"{{{ANDROID_NS}}}minSdkVersion", str(min_sdk))
    sdk.set(f"{{{ANDROID_NS}}}targetSdkVersion", "35")
    application = ET.SubElement(root, "application")
    application.set(f"{{{ANDROID_NS}}}label", "ortbundle host")
    application.set(f"{{{ANDROID_NS}}}hasCode", "false")  # no d8 here: no classes.dex
    for child in library.findall("application/*"):
        application.append(child)
    text: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return text


def assemble(
    module: Path, work: Path, tools: Tools, package: str = "org.example.host"
) -> Assembled:
    """Build, align and sign the host APK from `module` (the runtime-loader directory)."""
    work.mkdir(parents=True, exist_ok=True)
    min_sdk = module_min_sdk(module)
    manifest = work / "AndroidManifest.xml"
    manifest.write_bytes(host_manifest(module, package, min_sdk))
    unaligned = work / "unaligned.apk"
    # the module's noCompress; Debian's aapt2 matches the suffix with its dot ("onnx" matches
    # nothing there, while the Gradle plugin's packager takes "onnx")
    no_compress = [arg for extension in NO_COMPRESS for arg in ("-0", f".{extension}")]
    # Debian's aapt2 knows API 29, not <uses-native-library> (API 31): a warning, not an error
    tools.run(
        "aapt2", "link", "-o", str(unaligned), "--manifest", str(manifest),
        "-I", str(tools.framework_res), "-A", str(module / "src/main/assets"),
        "--warn-manifest-validation", *no_compress,
    )  # fmt: skip
    libraries = module / "src/main/jniLibs"
    abis = tuple(sorted(p.name for p in libraries.iterdir() if p.is_dir()))
    with zipfile.ZipFile(unaligned, "a", compression=zipfile.ZIP_STORED) as apk:
        for abi in abis:
            for library in sorted((libraries / abi).glob("*.so")):
                apk.write(library, f"lib/{abi}/{library.name}")
    aligned = work / "aligned.apk"
    # the build's own advice, exactly as it prints it
    command = shlex.split(aligned_apk_command(str(unaligned), str(aligned)))
    assert command[0] == "zipalign"
    tools.run("zipalign", *command[1:])
    keystore = work / "throwaway.p12"
    tools.run(
        "keytool", "-genkeypair", "-keystore", str(keystore), "-storetype", "PKCS12",
        "-storepass", _PASSWORD, "-keypass", _PASSWORD, "-alias", "host", "-keyalg", "RSA",
        "-keysize", "2048", "-validity", "2", "-dname", "CN=ortbundle throwaway",
    )  # fmt: skip
    signed = work / "host.apk"
    tools.run(
        "apksigner", "sign", "--ks", str(keystore), "--ks-pass", f"pass:{_PASSWORD}",
        "--out", str(signed), str(aligned),
    )  # fmt: skip
    return Assembled(unaligned=unaligned, signed=signed, abis=abis, min_sdk=min_sdk)


def badging(tools: Tools, apk: Path) -> dict[str, list[str]]:
    """`aapt dump badging`, as key -> the quoted values of its lines."""
    out = tools.run("aapt", "dump", "badging", str(apk)).stdout
    fields: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, _, rest = line.partition(":")
        fields.setdefault(key, []).extend(re.findall(r"'([^']*)'", rest))
    return fields
