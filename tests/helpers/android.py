"""A synthetic Android project: the stock runtime from an npm tarball (nested AAR), the QNN
runtime from two Maven AARs, built from ELF fixtures of the right machine and alignment."""

from __future__ import annotations

import hashlib
import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from ortbundle.config.plan import BuildOptions, Project
from tests.helpers.elf import make_elf
from tests.helpers.project import CORE_EXPORTS, CPU, FAST_RETRY, REPO_POLICY
from tests.helpers.tarballs import make_aar, make_tarball

AAR_MEMBER = "package/Plugins/Android/onnxruntime.aar"
K16 = 0x4000
BIONIC = ("libc.so", "libm.so", "libdl.so", "liblog.so")


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stock_members(align: int = K16) -> dict[str, bytes]:
    """The stock AAR's jni/: the runtime and its Java binding per ABI, headers, a jar."""
    members: dict[str, bytes] = {"headers/onnxruntime_c_api.h": b"/* C API */\n"}
    for abi, machine in (("arm64-v8a", "EM_AARCH64"), ("x86_64", "EM_X86_64")):
        members[f"jni/{abi}/libonnxruntime.so"] = make_elf(
            machine=machine,
            soname="libonnxruntime.so",
            needed=BIONIC,
            align=align,
            exports=CORE_EXPORTS,
            rodata=CPU,
        )
        members[f"jni/{abi}/libonnxruntime4j_jni.so"] = make_elf(
            machine=machine,
            soname="libonnxruntime4j_jni.so",
            needed=("libonnxruntime.so", "libc.so"),
            align=K16,
        )
    return members


def qnn_members(skel_machine: str = "EM_QDSP6") -> dict[str, bytes]:
    members = {
        "jni/arm64-v8a/libQnnHtp.so": make_elf(
            machine="EM_AARCH64", soname="libQnnHtp.so", needed=("libc.so", "libdl.so"), align=K16
        ),
        "jni/arm64-v8a/libQnnSystem.so": make_elf(
            machine="EM_AARCH64", soname="libQnnSystem.so", needed=("libc.so",), align=K16
        ),
        "jni/arm64-v8a/libQnnGpu.so": make_elf(
            machine="EM_AARCH64", soname="libQnnGpu.so", needed=("libc.so",), align=K16
        ),
        "LICENSE.pdf": b"%PDF-1.4\n% Qualcomm licence (fixture)\n%%EOF\n",
    }
    for generation in ("V73", "V75"):
        members[f"jni/arm64-v8a/libQnnHtp{generation}Stub.so"] = make_elf(
            machine="EM_AARCH64",
            soname=f"libQnnHtp{generation}Stub.so",
            needed=("libc.so", "libcdsprpc.so"),
            align=K16,
        )
        # Hexagon DSP code: a 32-bit ELF, 4 KB aligned, not loaded by the Android linker
        members[f"jni/arm64-v8a/libQnnHtp{generation}Skel.so"] = make_elf(
            machine=skel_machine, soname=f"libQnnHtp{generation}Skel.so", bits=32
        )
    return members


@dataclass
class AndroidProject:
    root: Path
    stock: dict[str, bytes] = field(default_factory=stock_members)
    qnn_ort: dict[str, bytes] = field(
        default_factory=lambda: {
            "jni/arm64-v8a/libonnxruntime.so": make_elf(
                machine="EM_AARCH64",
                soname="libonnxruntime.so",
                needed=BIONIC,
                align=K16,
                exports=CORE_EXPORTS,
                rodata=("QNNExecutionProvider", *CPU),
            )
        }
    )
    qnn: dict[str, bytes] = field(default_factory=qnn_members)
    with_qnn: bool = False
    environ_extra: dict[str, str] = field(default_factory=dict)
    artifacts: dict[str, bytes] = field(default_factory=dict)  # file name -> bytes to serve

    def write(self) -> AndroidProject:
        aar = make_aar(self.stock)
        tarball = make_tarball({"package/LICENSE": b"MIT License\n", AAR_MEMBER: aar})
        self.artifacts["stock.tgz"] = tarball
        self.artifacts["onnxruntime-android-qnn-1.0.0.aar"] = make_aar(self.qnn_ort)
        self.artifacts["qnn-runtime-2.0.0.aar"] = make_aar(self.qnn)
        for directory in ("recipes", "manifests", "licenses/ort"):
            (self.root / directory).mkdir(parents=True, exist_ok=True)
        (self.root / "licenses/policy.toml").write_text(REPO_POLICY.read_text("utf-8"))
        (self.root / "licenses/ort/LICENSE").write_text("MIT License\n\nCopyright (c) Fake\n")
        (self.root / "recipes/generic.toml").write_text(self._generic(tarball, aar))
        (self.root / "recipes/qnn.toml").write_text(self._qnn())
        runtimes = ["qnn", "generic"] if self.with_qnn else ["generic"]
        (self.root / "manifests/phone.toml").write_text(
            textwrap.dedent(
                f"""\
                [product]
                name = "phone"
                version = "1.0"
                description = "A synthetic Android product"
                url = "https://example.invalid/"
                targets = ["android-arm64-v8a", "android-x86_64"]
                runtimes = {json.dumps(runtimes)}
                {"[runtime.qnn]" if self.with_qnn else ""}
                {'targets = ["android-arm64-v8a"]' if self.with_qnn else ""}

                [packaging]
                android_namespace = "invalid.phone.runtime"
                """
            )
        )
        return self

    def _generic(self, tarball: bytes, aar: bytes) -> str:
        sections = []
        for abi in ("arm64-v8a", "x86_64"):
            sections.append(
                f"""
                [targets.android-{abi}]
                entry = "libonnxruntime.so"
                roots = ["libonnxruntime.so"]

                [[targets.android-{abi}.take]]
                source = "aar"
                libraries = ["jni/{abi}/*.so"]

                [[targets.android-{abi}.drop]]
                names = ["libonnxruntime4j_jni.so"]
                reason = "Java binding"

                [[targets.android-{abi}.rename]]
                from = "libonnxruntime.so"
                to = "libonnxruntime_generic.so"

                [[targets.android-{abi}.licenses]]
                component = "onnxruntime-android"
                version = "1.0.0"
                expression = "MIT"
                files = ["lib*"]
                texts = [{{ file = "ort/LICENSE" }}]
                """
            )
        return textwrap.dedent(
            f"""\
            [component]
            name = "generic"
            kind = "runtime"
            version = "1.0.0"
            description = "stock"
            providers = ["CPUExecutionProvider"]

            [sources.aar]
            npm = {{ package = "fake-onnxruntime", version = "1.0.0" }}
            sha256 = "{sha256_of(tarball)}"
            nested = [{{ member = "{AAR_MEMBER}", sha256 = "{sha256_of(aar)}" }}]
            """
        ) + "".join(textwrap.dedent(s) for s in sections)

    def _qnn(self) -> str:
        ort = sha256_of(self.artifacts["onnxruntime-android-qnn-1.0.0.aar"])
        qnn = sha256_of(self.artifacts["qnn-runtime-2.0.0.aar"])
        return textwrap.dedent(
            f"""\
            [component]
            name = "qnn"
            kind = "runtime"
            version = "1.0.0"
            description = "QNN"
            providers = ["QNNExecutionProvider", "CPUExecutionProvider"]
            soc_families = ["qualcomm"]

            [sources.ort]
            maven = {{ group = "com.example.ort", artifact = "onnxruntime-android-qnn", version = "1.0.0" }}
            sha256 = "{ort}"

            [sources.qnn]
            maven = {{ group = "com.example.qti", artifact = "qnn-runtime", version = "2.0.0" }}
            sha256 = "{qnn}"

            [targets.android-arm64-v8a]
            entry = "libonnxruntime.so"
            roots = ["libonnxruntime.so", "libQnnHtp.so", "libQnnSystem.so", "libQnnHtpV73Stub.so",
                     "libQnnHtpV75Stub.so"]

            [[targets.android-arm64-v8a.take]]
            source = "ort"
            libraries = ["jni/arm64-v8a/*.so"]

            [[targets.android-arm64-v8a.take]]
            source = "qnn"
            libraries = ["jni/arm64-v8a/libQnn*.so"]

            [[targets.android-arm64-v8a.drop]]
            names = ["libQnnGpu.so", "libQnnHtpV*Skel.so"]
            reason = "unused backend; Skels ship as DSP payload"

            [[targets.android-arm64-v8a.payload]]
            source = "qnn"
            files = ["jni/arm64-v8a/libQnnHtpV*Skel.so"]
            machines = ["EM_QDSP6"]
            place = "assets"
            reason = "Hexagon DSP Skels"

            [[targets.android-arm64-v8a.licenses]]
            component = "onnxruntime-android-qnn"
            version = "1.0.0"
            expression = "MIT"
            files = ["libonnxruntime.so"]
            texts = [{{ file = "ort/LICENSE" }}]

            [[targets.android-arm64-v8a.licenses]]
            component = "qnn-runtime"
            version = "2.0.0"
            expression = "LicenseRef-Qualcomm-AI-Engine-Direct"
            files = ["libQnn*.so"]
            texts = [{{ source = "qnn", member = "LICENSE.pdf" }}]
            """
        )

    @property
    def project(self) -> Project:
        return Project.at(self.root)

    def options(self, **overrides: object) -> BuildOptions:
        values: dict[str, object] = {
            "product": "phone",
            "cache_dir": self.root / "cache",
            "retry": FAST_RETRY,
            "jobs": 2,
            "environ": {
                "HOME": str(self.root / "home"),
                "SOURCE_DATE_EPOCH": "1700000000",
                **self.environ_extra,
            },
        }
        values.update(overrides)
        return BuildOptions(**values)  # type: ignore[arg-type]
