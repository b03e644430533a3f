"""A synthetic ortbundle project: wheels built from ELF/PE fixtures, a recipe, a product."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from ortbundle.config.retry import RetryPolicy
from ortbundle.evidence.signing import generate_keypair, write_public_key, write_secret_key
from ortbundle.pipeline.build import BuildOptions, Project
from tests.helpers.elf import make_elf
from tests.helpers.index_server import IndexServer
from tests.helpers.pe import make_pe
from tests.helpers.wheels import make_wheel, sha256_of

REPO_POLICY = Path(__file__).resolve().parents[2] / "licenses" / "policy.toml"
WINDOWS_LICENSES = """
[[targets.windows-x86_64.licenses]]
component = "fake"
version = "1.0.0"
expression = "MIT"
files = ["*.dll"]
texts = [{ source = "windows", member = "onnxruntime/LICENSE" }]
"""
FAST_RETRY = RetryPolicy(attempts=4, base_delay=0.01, max_delay=0.05, read_timeout=2.0)
# what makes a fixture library an ONNX Runtime core to the build: it exports the C API's entry
# point and names the providers the recipe states (ortbundle/stage/kinds.py)
CORE_EXPORTS = ("OrtGetApiBase",)
PLUGIN_EXPORTS = ("CreateEpFactories", "ReleaseEpFactory")  # a plugin EP's, likewise
CPU = ("CPUExecutionProvider",)


def linux_members() -> dict[str, bytes]:
    core = make_elf(
        soname="libonnxruntime.so.1",
        needed=("libdep.so.2", "libc.so.6", "libstdc++.so.6"),
        runpath="$ORIGIN",
        payload=b"core" * 2000,
        exports=CORE_EXPORTS,
        rodata=CPU,
    )
    dep = make_elf(soname="libdep.so.2", needed=("libm.so.6",), payload=b"dep" * 1000)
    return {
        "onnxruntime/capi/libonnxruntime.so.1.0.0": core,
        "onnxruntime/capi/libdep.so.2": dep,
        "onnxruntime/capi/libdep.so": dep,  # alias copy, as zip has no symlinks
        "onnxruntime/capi/libprovider.so": make_elf(needed=("libonnxruntime_shared.so",)),
        "onnxruntime/capi/libonnxruntime_shared.so": make_elf(
            soname="libonnxruntime_shared.so", needed=("libc.so.6",)
        ),
        "onnxruntime/capi/libunused.so": make_elf(soname="libunused.so"),
        "onnxruntime/capi/onnxruntime_pybind11_state.so": make_elf(needed=("libpython3.so",)),
        "onnxruntime/LICENSE": b"MIT License\n\nCopyright (c) Fake Corp\n",
        "onnxruntime/__init__.py": b"",
    }


def windows_members() -> dict[str, bytes]:
    return {
        "onnxruntime/capi/onnxruntime.dll": make_pe(
            imports=("KERNEL32.dll", "dep.dll", "MSVCP140.dll"),
            delay_imports=("delayed.dll",),
            exports=CORE_EXPORTS,
            rodata=CPU,
        ),
        "onnxruntime/capi/dep.dll": make_pe(imports=("kernel32.dll",)),
        "onnxruntime/capi/Delayed.dll": make_pe(imports=("api-ms-win-crt-heap-l1-1-0.dll",)),
        "onnxruntime/capi/onnxruntime_pybind11_state.pyd": make_pe(imports=("python311.dll",)),
        "onnxruntime/LICENSE": b"MIT License\n\nCopyright (c) Fake Corp\n",
    }


@dataclass
class FakeProject:
    """Build wheels, write recipe and product, serve the wheels from `server`."""

    root: Path
    server: IndexServer
    linux: dict[str, bytes] = field(default_factory=linux_members)
    windows: dict[str, bytes] = field(default_factory=windows_members)
    linux_roots: list[str] = field(
        default_factory=lambda: ["libonnxruntime.so.*", "libprovider.so"]
    )
    windows_roots: list[str] = field(default_factory=lambda: ["onnxruntime.dll"])
    pins: dict[str, str] = field(default_factory=dict)  # override a target's sha256 pin
    windows_licenses: str = WINDOWS_LICENSES  # the Windows target's [[licenses]] rules
    product_extra: str = ""  # appended to the product manifest (waivers, channels, …)
    policy: str = REPO_POLICY.read_text("utf-8")
    wheels: dict[str, Path] = field(default_factory=dict)

    def write(self) -> FakeProject:
        wheel_dir = self.root / "wheels"
        self.wheels["linux-x86_64"] = make_wheel(
            wheel_dir / "onnxruntime_fake-1.0.0-cp311-cp311-manylinux_2_28_x86_64.whl",
            "onnxruntime-fake",
            "1.0.0",
            self.linux,
        )
        self.wheels["windows-x86_64"] = make_wheel(
            wheel_dir / "onnxruntime_fake-1.0.0-cp311-cp311-win_amd64.whl",
            "onnxruntime-fake",
            "1.0.0",
            self.windows,
        )
        for wheel in self.wheels.values():
            self.server.add("onnxruntime-fake", wheel)
        (self.root / "recipes").mkdir(parents=True, exist_ok=True)
        (self.root / "manifests").mkdir(parents=True, exist_ok=True)
        (self.root / "licenses").mkdir(parents=True, exist_ok=True)
        (self.root / "recipes" / "fake.toml").write_text(self.recipe_text())
        (self.root / "manifests" / "fakeproduct.toml").write_text(
            textwrap.dedent(
                """\
                [product]
                name = "fakeproduct"
                version = "1.2.3"
                description = "A synthetic product"
                url = "https://example.invalid/"
                targets = ["linux-x86_64", "windows-x86_64"]
                runtimes = ["fake"]
                """
            )
            + self.product_extra
        )
        (self.root / "licenses" / "policy.toml").write_text(self.policy)
        if not self.secret_key.exists():
            secret, public = generate_keypair()
            self.secret_key.parent.mkdir(mode=0o700)
            (self.root / "keys").mkdir(exist_ok=True)
            write_secret_key(self.secret_key, secret)
            write_public_key(self.root / "keys" / "fakeproduct.pub", public)
        return self

    @property
    def secret_key(self) -> Path:
        return self.root / "private" / "fakeproduct.key"

    @property
    def environ(self) -> dict[str, str]:
        """An isolated environment: signed with the project's key, a fixed SOURCE_DATE_EPOCH."""
        return {
            "HOME": str(self.root / "home"),
            "SOURCE_DATE_EPOCH": "1700000000",
            "ORTBUNDLE_SIGNING_KEY_FILE": str(self.secret_key),
        }

    def pin(self, target: str) -> str:
        return self.pins.get(target) or sha256_of(self.wheels[target])

    def recipe_text(self) -> str:
        linux, windows = self.wheels["linux-x86_64"], self.wheels["windows-x86_64"]
        return (
            textwrap.dedent(
                f"""\
            # A synthetic runtime: comments must survive `pin`.
            [component]
            name = "fake"
            kind = "runtime"
            version = "1.0.0"
            description = "Fake runtime"
            providers = ["CPUExecutionProvider"]
            gpu_vendors = []

            [sources.linux]
            pypi = {{ project = "onnxruntime-fake", version = "1.0.0", filename = "{linux.name}" }}
            sha256 = "{self.pin("linux-x86_64")}"

            [sources.windows]
            pypi = {{ project = "onnxruntime-fake", version = "1.0.0", filename = "{windows.name}" }}
            sha256 = "{self.pin("windows-x86_64")}"

            [targets.linux-x86_64]
            entry = "libonnxruntime.so.*.*.*"
            roots = {json.dumps(self.linux_roots)}

            [[targets.linux-x86_64.take]]
            source = "linux"
            libraries = ["onnxruntime/capi/*.so", "onnxruntime/capi/*.so.*"]

            [[targets.linux-x86_64.drop]]
            names = ["onnxruntime_pybind11_state*"]
            reason = "Python binding"

            [[targets.linux-x86_64.licenses]]
            component = "fake"
            version = "1.0.0"
            expression = "MIT"
            files = ["lib*"]
            texts = [{{ source = "linux", member = "onnxruntime/LICENSE" }}]

            [targets.windows-x86_64]
            entry = "onnxruntime.dll"
            roots = {json.dumps(self.windows_roots)}

            [[targets.windows-x86_64.take]]
            source = "windows"
            libraries = ["onnxruntime/capi/*.dll", "onnxruntime/capi/*.pyd"]

            [[targets.windows-x86_64.drop]]
            names = ["*.pyd"]
            reason = "Python binding"
            """
            )
            + self.windows_licenses
        )

    @property
    def project(self) -> Project:
        return Project.at(self.root)

    def options(self, **overrides: object) -> BuildOptions:
        values: dict[str, object] = {
            "product": "fakeproduct",
            "index_url": self.server.url,
            "cache_dir": self.root / "cache",
            "retry": FAST_RETRY,
            "jobs": 2,
            "environ": self.environ,
        }
        values.update(overrides)
        return BuildOptions(**values)  # type: ignore[arg-type]
