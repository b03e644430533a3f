"""The closed word lists and word patterns of the input files, each kept once: the code that acts
on a word and the schema that checks it both read it from here, so neither imports the other."""

from __future__ import annotations

import re

# Which targets' stages each packaging channel packages: the Linux channels one package per
# machine, the installer one, the Android module every Android ABI the product builds.
CHANNEL_TARGETS: dict[str, tuple[str, ...]] = {
    "arch": ("linux-x86_64", "linux-aarch64"),
    "flatpak": ("linux-x86_64", "linux-aarch64"),
    "nsis": ("windows-x86_64", "windows-arm64"),
    "apk": ("android-arm64-v8a", "android-x86_64"),
    "deb": ("linux-x86_64", "linux-aarch64"),
    "rpm": ("linux-x86_64", "linux-aarch64"),
    "macos": ("macos-arm64",),
}
# The channels whose targets make one package together (the APK module: one ABI each) and so
# share one directory; every other channel makes one package per target.
SHARED_PACKAGE_CHANNELS = ("apk",)


def package_target(channel: str, path: str) -> str | None:
    """Which target's package a file under packaging/<channel>/ (`path`, relative to it)
    belongs to: a further target's subdirectory names it, the rest is the first target's
    (channels/package_directory); None for a package of all its targets (the APK module)."""
    targets = CHANNEL_TARGETS.get(channel, ())
    if channel in SHARED_PACKAGE_CHANNELS or not targets:
        return None
    first = path.split("/", 1)[0]
    return first if first in targets[1:] and "/" in path else targets[0]


# What provides a library the bundle does not ship: the operating system, the compiler's
# runtime, a redistributable the user installs, a GPU driver, or a vendor toolkit.
EXTERNAL_KINDS = ("system", "toolchain", "redist", "driver", "toolkit")
OPERATING_SYSTEMS = ("linux", "windows", "android", "macos")
BINARY_FORMATS = ("elf", "pe", "macho")

PAYLOAD_PLACES = ("beside", "assets")
# What a component's libraries are to ONNX Runtime: a core (exports OrtGetApiBase), a plugin EP
# (CreateEpFactories), a custom-operator library a session registers (RegisterCustomOps), and a
# library that uses a core (links or opens one, as ONNX Runtime GenAI does). A model recipe says
# MODEL_KIND.
RECIPE_KINDS = ("runtime", "plugin-ep", "custom-ops", "uses-core")
# the kinds that ship beside a core, each under its own table of the product manifest naming
# the runtimes it pairs with ([plugin.<name>] pairs_with = [...]) and its directory in a stage
PAIRED_KINDS: dict[str, str] = {
    "plugin-ep": "plugin",
    "custom-ops": "custom_ops",
    "uses-core": "uses_core",
}
KIND_DIRECTORIES: dict[str, str] = {
    "runtime": "runtimes",
    "plugin-ep": "plugins",
    "custom-ops": "custom_ops",
    "uses-core": "libraries",
}
MODEL_KIND = "model"  # [component] kind of a model recipe

ON_NEWER = ("error", "warn")  # [system] on_newer: what a library needing a newer system does

# Package relations a Linux package may state towards a system package (Debian and RPM alike).
PACKAGE_RELATIONS = ("depends", "recommends", "suggests")

# The keys of a [[licenses]] rule `invoke new-recipe` may have guessed (`guessed = [...]`): a build
# warns about each until a person checks it and removes it, a release refuses any.
GUESSABLE = ("component", "version", "expression", "files", "texts")

# The licence audit's verdicts, best first (licensing/audit.py ranks them in this order).
VERDICTS = ("allow", "review", "refuse")


SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


# what may become one path component (dist/<product>/<version>, licenses/<component>/)
PATH_WORD = re.compile(r"^[A-Za-z0-9_+][A-Za-z0-9._+-]*$")


NAME_WORD = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


PURL = re.compile(r"^pkg:[a-z][a-z0-9.+-]*/\S+$")  # a package URL: pkg:type/name@version


# a product's template directory ([packaging] templates): templates/ or a directory in it, so
# that the quick no-op record, which watches templates/, sees every edit
TEMPLATES_DIR = re.compile(r"^templates(/[A-Za-z0-9_+-][A-Za-z0-9._+-]*)*$")


# What a plugin EP's device can be ([component] device kind): an NPU behind the kernel's DRM
# accel subsystem, /dev/accel/accel* (the loader's NPU rung, payload/loader/hardware.py).
DEVICE_KINDS = ("accel",)

# ONNX Runtime's graph optimisation levels, as GraphOptimizationLevel names them: a plugin EP's
# required session options say one ([component.session_options]).
GRAPH_OPTIMIZATION_LEVELS = (
    "ORT_DISABLE_ALL",
    "ORT_ENABLE_BASIC",
    "ORT_ENABLE_EXTENDED",
    "ORT_ENABLE_LAYOUT",
    "ORT_ENABLE_ALL",
)
