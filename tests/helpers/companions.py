"""Components shipped beside a core, as synthetic wheels with their recipes and pairings: a
custom-operator library (exports RegisterCustomOps, as onnxruntime-extensions' library does) and
a library that uses a core (as ONNX Runtime GenAI does: on Linux it links libonnxruntime.so.1,
on Windows it opens onnxruntime.dll by name through LoadLibraryExW)."""

from __future__ import annotations

from dataclasses import dataclass

from tests.helpers.elf import make_elf
from tests.helpers.pe import make_pe
from tests.helpers.project import FakeProject
from tests.helpers.wheels import make_wheel, sha256_of

CUSTOM_OPS_EXPORTS = ("RegisterCustomOps", "GetActiveOrtAPIVersion")
GENAI_EXPORTS = ("OgaCreateModel", "OgaDestroyModel")


@dataclass(frozen=True)
class Companion:
    """One synthetic component: its recipe name and kind, the product table pairing it, its
    library file per OS, and the members of its wheels."""

    name: str
    kind: str
    table: str
    linux_library: str
    windows_library: str
    linux: dict[str, bytes]
    windows: dict[str, bytes]


def custom_ops(*, exports: tuple[str, ...] = CUSTOM_OPS_EXPORTS) -> Companion:
    """onnxruntime-extensions' shape: one library exporting RegisterCustomOps."""
    notice = b"MIT License\n\nCopyright (c) Fake Extensions Authors\n"
    return Companion(
        "extensions",
        "custom-ops",
        "custom_ops",
        "libortextensions.so",
        "ortextensions.dll",
        {
            "ortx/libortextensions.so": make_elf(needed=("libc.so.6",), exports=exports),
            "ortx/LICENSE": notice,
        },
        {
            "ortx/ortextensions.dll": make_pe(imports=("KERNEL32.dll",), exports=exports),
            "ortx/LICENSE": notice,
        },
    )


def uses_core(*, link: str = "libonnxruntime.so.1", opens: str = "onnxruntime.dll") -> Companion:
    """ONNX Runtime GenAI's shape: its own C API, and the core linked (Linux) or opened by name
    (Windows); `link` or `opens` empty leaves that out."""
    notice = b"MIT License\n\nCopyright (c) Fake GenAI Authors\n"
    windows = make_pe(
        imports=("KERNEL32.dll",),
        functions={"KERNEL32.dll": ("LoadLibraryExW",)},
        exports=GENAI_EXPORTS,
        rodata=(opens,) if opens else (),
    )
    needed = (link, "libc.so.6") if link else ("libc.so.6",)
    return Companion(
        "genai",
        "uses-core",
        "uses_core",
        "libonnxruntime-genai.so",
        "onnxruntime-genai.dll",
        {
            "genai/libonnxruntime-genai.so": make_elf(needed=needed, exports=GENAI_EXPORTS),
            "genai/LICENSE": notice,
        },
        {"genai/onnxruntime-genai.dll": windows, "genai/LICENSE": notice},
    )


def add_companion(fake: FakeProject, companion: Companion, *, kind: str = "") -> FakeProject:
    """Its wheels served, its recipe written (saying `kind`, by default its own), and the product
    pairing it with the fake runtime; the project is written first unless it already is."""
    if not (fake.root / "manifests" / "fakeproduct.toml").is_file():
        fake.write()
    name = companion.name
    wheels = fake.root / "companion-wheels"
    files = {}
    for os_name, members, tag in (
        ("linux", companion.linux, "manylinux_2_28_x86_64"),
        ("windows", companion.windows, "win_amd64"),
    ):
        filename = f"fake_{name}-0.2.0-py3-none-{tag}.whl"
        wheel = make_wheel(wheels / filename, f"fake-{name}", "0.2.0", members)
        fake.server.add(f"fake-{name}", wheel)
        files[os_name] = (filename, sha256_of(wheel))
    directory = next(iter(companion.linux)).split("/")[0]
    sections = []
    for target, os_name, library, suffix in (
        ("linux-x86_64", "linux", companion.linux_library, "so*"),
        ("windows-x86_64", "windows", companion.windows_library, "dll"),
    ):
        sections.append(f"""
[targets.{target}]
entry = "{library}"
roots = ["{library}"]

[[targets.{target}.take]]
source = "{os_name}"
libraries = ["{directory}/*.{suffix}"]

[[targets.{target}.licenses]]
component = "{name}"
version = "0.2.0"
expression = "MIT"
files = ["*"]
texts = [{{ source = "{os_name}", member = "{directory}/LICENSE" }}]
""")
    sources = "".join(
        f"""
[sources.{os_name}]
pypi = {{ project = "fake-{name}", version = "0.2.0", filename = "{filename}" }}
sha256 = "{digest}"
"""
        for os_name, (filename, digest) in files.items()
    )
    (fake.root / "recipes" / f"{name}.toml").write_text(f"""
[component]
name = "{name}"
kind = "{kind or companion.kind}"
version = "0.2.0"
label = "Fake {name}"
description = "A synthetic {companion.kind} component"
{sources}{"".join(sections)}""")
    manifest = fake.root / "manifests" / "fakeproduct.toml"
    pairing = f'\n[{companion.table}.{name}]\npairs_with = ["fake"]\n'
    manifest.write_text(manifest.read_text() + pairing)
    return fake
