"""Product manifests (`manifests/<product>.toml`): runtimes per target, channels, packaging
settings, waivers and the oldest system the product supports."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

from ortbundle._core.errors import ConfigError
from ortbundle.config.externals import read_externals
from ortbundle.config.policy_overlay import PolicyOverlay, read_policy
from ortbundle.config.targets import ExternalSpec
from ortbundle.config.tomlreader import TableReader, load_toml
from ortbundle.config.vocabulary import (
    CHANNEL_TARGETS,
    NAME_WORD,
    ON_NEWER,
    PAIRED_KINDS,
    PATH_WORD,
)


@dataclass(frozen=True)
class PackagingSettings:
    """The product manifest's [packaging] table, with defaults filled in."""

    package_name: str  # Arch pkgname, NSIS install directory, Flatpak module name
    pkgrel: int
    publisher: str  # NSIS VersionInfo CompanyName and Add/Remove Programs publisher
    flatpak_app_id: str
    flatpak_runtime: str
    flatpak_runtime_version: str
    flatpak_sdk: str
    flatpak_command: str
    android_namespace: str = "org.example.app.runtime"  # Gradle namespace and Java package
    maintainer: str = ""  # "Name <address>" for .deb/.rpm; empty: publisher <packages@url host>
    # runtimes the Flatpak leaves out: they need host-only libraries the sandbox cannot see
    flatpak_skip_runtimes: tuple[str, ...] = ()
    # where the product's template replacements are looked for first (under the project root)
    templates: str = "templates"


@dataclass(frozen=True)
class Waiver:
    """A person's signed-off exception: the audit accepts this file's gap and says so loudly."""

    file: str  # glob over target-relative staged paths
    license: str  # the attributed expression it accepts; a changed licence voids it
    reason: str
    reviewer: str
    targets: tuple[str, ...]  # empty: every target
    channels: tuple[str, ...]  # empty: every channel
    # The sign-off a --release needs (licensing/waivers.py): the bytes reviewed, when, until when.
    sha256: tuple[str, ...] = ()  # of each file it covers: other bytes re-open the question
    reviewed: date | None = None
    expires: date | None = None
    entry: str = ""  # where it is written: "waivers[0]"
    manifest: str = ""  # in which product manifest (file name only: no host path in outputs)


@dataclass(frozen=True)
class SystemSpec:
    """`[system]`: the oldest system the product promises to run on. A runtime whose binaries
    need newer stops the build (`on_newer = "error"`) or is reported (`"warn"`)."""

    glibc: str | None = None  # "2.28"
    windows: str | None = None  # NT version: "6.1", "10.0"
    android_api: int | None = None  # 24
    on_newer: str = "error"  # error | warn
    macos: str | None = None  # "14.0": held against the Mach-O files' minos


@dataclass(frozen=True)
class Addon:
    """The main product an add-on installs beside, read from its manifest: the add-on's files
    go into that product's directory, where its loader reads the add-on's runtimes.d/ fragment."""

    name: str  # the main product's name
    package_name: str  # its [packaging] package_name: the add-on installs into its directory
    version: str


@dataclass(frozen=True)
class Product:
    name: str
    version: str
    description: str
    url: str
    targets: tuple[str, ...]
    runtimes: tuple[str, ...]  # in the loader's search order
    models: tuple[str, ...]  # model recipes shipped on every target
    plugins: dict[str, tuple[str, ...]]  # plugin EP recipe -> the runtimes it registers with
    runtime_targets: dict[str, tuple[str, ...]]
    override_env: str  # the variable that names a runtime directory and wins outright
    channels: tuple[str, ...]  # packaging channels built for it
    packaging: PackagingSettings
    waivers: tuple[Waiver, ...]
    path: Path
    digest: str
    system: SystemSpec = SystemSpec()
    externals: tuple[ExternalSpec, ...] = ()  # [[externals]]: its runtimes' system requirements
    policy: PolicyOverlay = field(
        default_factory=PolicyOverlay
    )  # [policy]: over licenses/policy.toml
    addon_of: Addon | None = None  # [product] addon_of: the main product it installs beside
    # [product] license: the application's own licence (SPDX, or LicenseRef-Proprietary); the
    # audit judges each copyleft component against it and against how it ships; None: unstated
    license: str | None = None
    # the add-ons whose packages this (main) product's packages suggest ([product] suggested
    # in their manifests beside this one): optional, never depended on
    suggests: tuple[Suggested, ...] = ()
    # [custom_ops.<name>]: a custom-op library recipe -> the runtimes whose sessions register it
    custom_ops: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # [uses_core.<name>]: a library using a core (GenAI) -> the runtimes it is offered beside
    uses_core: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def runtimes_for(self, target: str) -> tuple[str, ...]:
        return tuple(r for r in self.runtimes if target in self.runtime_targets[r])

    @property
    def paired(self) -> dict[str, tuple[str, ...]]:
        """Every component shipped beside a core (plugin EPs, custom-op libraries, libraries
        using a core) -> the runtimes it pairs with."""
        return {**self.plugins, **self.custom_ops, **self.uses_core}

    def pairing(self, kind: str) -> dict[str, tuple[str, ...]]:
        """The pairing table of one kind ([plugin], [custom_ops] or [uses_core])."""
        tables = {"plugin-ep": self.plugins, "custom-ops": self.custom_ops}
        return {**tables, "uses-core": self.uses_core}.get(kind, {})


def load_product(path: Path) -> Product:
    data, digest = load_toml(path, "product")
    top = TableReader(path, "", data)
    product = top.sub("product")
    name = product.text("name")
    if not NAME_WORD.match(name):
        raise product.fail(f"name {name!r} must be lower-case letters, digits, . _ -")
    targets = product.text_list("targets")
    for t in targets:
        product.target(t, "targets")
    runtimes = product.text_list("runtimes")
    runtime_targets: dict[str, tuple[str, ...]] = {}
    overrides = top.table.get("runtime", {})
    for runtime in runtimes:
        if isinstance(overrides, dict) and runtime in overrides:
            only = TableReader(path, f"runtime.{runtime}", overrides[runtime]).text_list("targets")
            unknown = sorted(set(only) - set(targets))
            if unknown:
                raise ConfigError(
                    f"runtime {runtime} names targets the product lacks: {', '.join(unknown)}",
                    file=str(path),
                )
            runtime_targets[runtime] = only
        else:
            runtime_targets[runtime] = targets
    channels = product.text_list("channels", required=False) or tuple(
        c for c, ts in CHANNEL_TARGETS.items() if set(ts) & set(targets)
    )
    for channel in channels:
        if channel not in CHANNEL_TARGETS or not set(CHANNEL_TARGETS[channel]) & set(targets):
            known = ", ".join(f"{c} ({' or '.join(ts)})" for c, ts in CHANNEL_TARGETS.items())
            raise product.fail(
                f"channel {channel!r} is unknown or none of its targets is built (known: {known})"
            )
    version = product.text("version")
    if not PATH_WORD.match(version):
        raise product.fail(
            f"version {version!r} names a directory under dist/: use letters, digits, . _ + -"
        )
    return Product(
        name=name,
        version=version,
        description=product.text("description"),
        url=product.http_url("url"),
        targets=targets,
        runtimes=runtimes,
        models=product.text_list("models", required=False),
        plugins=_paired(top, runtimes, "plugin"),
        custom_ops=_paired(top, runtimes, "custom_ops"),
        uses_core=_paired(top, runtimes, "uses_core"),
        runtime_targets=runtime_targets,
        override_env=TableReader(path, "loader", top.table.get("loader", {})).text(
            "override_env", "ORTBUNDLE_RUNTIME_DIR"
        ),
        channels=channels,
        packaging=_packaging(TableReader(path, "packaging", top.table.get("packaging", {})), name),
        waivers=tuple(_waiver(w, targets) for w in top.subs("waivers")),
        path=path,
        digest=digest,
        system=_system(TableReader(path, "system", top.table.get("system", {}))),
        externals=read_externals(top),
        policy=read_policy(top),
        addon_of=_addon(product, name),
        license=product.opt_text("license"),
        suggests=_suggested(path, name) if "addon_of" not in product.table else (),
    )


@dataclass(frozen=True)
class Suggested:
    """An add-on the main product's packages suggest: its package, on its targets, and why."""

    package_name: str
    targets: tuple[str, ...]
    description: str


def _suggested(path: Path, main: str) -> tuple[Suggested, ...]:
    """The manifests beside `path` that are add-ons of `main` and say `suggested = true`."""
    found = []
    for other in sorted(path.parent.glob("*.toml")):
        if other == path:
            continue
        data, _ = load_toml(other)
        table = data.get("product")
        if not isinstance(table, dict) or table.get("addon_of") != main:
            continue
        if table.get("suggested") is not True:
            continue
        top = TableReader(other, "", data)
        product = top.sub("product")
        packaging = TableReader(other, "packaging", top.table.get("packaging", {}))
        found.append(
            Suggested(
                _packaging(packaging, product.text("name")).package_name,
                product.text_list("targets"),
                product.text("description"),
            )
        )
    return tuple(found)


def _addon(product: TableReader, name: str) -> Addon | None:
    """`addon_of = "<main product>"`: the main manifest beside this one, itself no add-on."""
    main = product.opt_text("addon_of")
    if main is None:
        return None
    if main == name or not NAME_WORD.match(main):
        raise product.fail(f"addon_of {main!r} must name another product")
    path = product.path.parent / f"{main}.toml"
    if not path.is_file():
        raise ConfigError(
            f"addon_of names product {main!r}, which has no manifest",
            file=str(product.path),
            fix=f"add {path.name} beside this manifest, or fix addon_of",
        )
    data, _ = load_toml(path)
    top = TableReader(path, "", data)
    if "addon_of" in top.sub("product").table:
        raise product.fail(f"addon_of {main!r} is itself an add-on: name the main product")
    main_name = top.sub("product").text("name")
    packaging = TableReader(path, "packaging", top.table.get("packaging", {}))
    package_name = _packaging(packaging, main_name).package_name
    return Addon(main_name, package_name, top.sub("product").text("version"))


_DOTTED = re.compile(r"^[0-9]+(\.[0-9]+)+$")
_SYSTEM_KEYS = ("glibc", "windows", "macos", "android_api", "on_newer")


def _system(reader: TableReader) -> SystemSpec:
    """`[system] glibc = "2.28"`, `windows = "10.0"`, `macos = "14.0"`, `android_api = 24`,
    `on_newer`."""
    unknown = sorted(set(reader.table) - set(_SYSTEM_KEYS))
    if unknown:
        raise reader.fail(f"unknown key {unknown[0]!r} (known: {', '.join(_SYSTEM_KEYS)})")
    versions = {key: reader.opt_text(key) for key in ("glibc", "windows", "macos")}
    for key, value in versions.items():
        if value is not None and not _DOTTED.match(value):
            raise reader.fail(f'{key} {value!r} must be a dotted version such as "2.28"')
    api = reader.table.get("android_api")
    if api is not None and (not isinstance(api, int) or isinstance(api, bool) or api < 1):
        raise reader.fail("'android_api' must be a positive integer (an API level: 24)")
    on_newer = reader.text("on_newer", "error")
    if on_newer not in ON_NEWER:
        raise reader.fail(f'on_newer {on_newer!r} must be "error" or "warn"')
    return SystemSpec(
        versions["glibc"], versions["windows"], api, on_newer, macos=versions["macos"]
    )


_APP_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_-]*){2,}$")


def _paired(top: TableReader, runtimes: tuple[str, ...], key: str) -> dict[str, tuple[str, ...]]:
    """`[<key>.<name>] pairs_with = [...]` ([plugin], [custom_ops], [uses_core]): each component
    shipped beside a core and the runtimes it pairs with. A name is listed under one table."""
    table = top.table.get(key, {})
    if not isinstance(table, dict):
        raise top.fail(f"[{key}.<name>] must be tables")
    paired: dict[str, tuple[str, ...]] = {}
    for name in table:
        reader = TableReader(top.path, f"{key}.{name}", table[name])
        pairs = reader.text_list("pairs_with")
        unknown = sorted(set(pairs) - set(runtimes))
        if unknown:
            raise reader.fail(f"pairs_with names runtimes the product lacks: {', '.join(unknown)}")
        others = [k for k in PAIRED_KINDS.values() if k != key and name in top.table.get(k, {})]
        if others:
            raise reader.fail(f"{name} is also listed in [{others[0]}.{name}]: list it once")
        paired[name] = pairs
    return paired


def _packaging(reader: TableReader, product: str) -> PackagingSettings:
    package_name = reader.text("package_name", f"{product}-onnxruntime")
    if not re.match(r"^[a-z0-9@_+][a-z0-9@._+-]*$", package_name):
        raise reader.fail(f"package_name {package_name!r}: use lower-case letters, digits, @._+-")
    app_id = reader.text("flatpak_app_id", f"org.example.{product.replace('-', '_')}")
    if not _APP_ID.match(app_id) or len(app_id) > 255:
        raise reader.fail(f"flatpak_app_id {app_id!r} is not a reverse-DNS application id")
    pkgrel = reader.table.get("pkgrel", 1)
    if not isinstance(pkgrel, int) or isinstance(pkgrel, bool) or pkgrel < 1:
        raise reader.fail("'pkgrel' must be a positive integer")
    return PackagingSettings(
        package_name=package_name,
        pkgrel=pkgrel,
        publisher=reader.text("publisher", product),
        flatpak_app_id=app_id,
        flatpak_runtime=reader.text("flatpak_runtime", "org.freedesktop.Platform"),
        flatpak_runtime_version=reader.text("flatpak_runtime_version", "24.08"),
        flatpak_sdk=reader.text("flatpak_sdk", "org.freedesktop.Sdk"),
        flatpak_command=reader.text("flatpak_command", product),
        android_namespace=_android_namespace(reader, product),
        maintainer=reader.opt_text("maintainer") or "",
        flatpak_skip_runtimes=reader.text_list("flatpak_skip_runtimes", required=False),
        # templates/ or a directory in it (the schema's pattern): never outside the project
        templates=reader.text("templates", "templates"),
    )


_JAVA_PACKAGE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")


def _android_namespace(reader: TableReader, product: str) -> str:
    """The runtime-loader module's Gradle namespace, also its Java package."""
    default = "org.example." + re.sub(r"[^a-z0-9_]", "_", product) + ".runtime"
    namespace = reader.text("android_namespace", default)
    if not _JAVA_PACKAGE.match(namespace):
        raise reader.fail(f"android_namespace {namespace!r} is not a Java package name")
    return namespace


def _waiver(reader: TableReader, targets: tuple[str, ...]) -> Waiver:
    waiver = Waiver(
        file=reader.text("file"),
        license=reader.text("license"),
        reason=reader.text("reason"),
        reviewer=reader.text("reviewer"),
        targets=reader.text_list("targets", required=False),
        channels=reader.text_list("channels", required=False),
        sha256=signoff_sha256(reader),
        reviewed=signoff_date(reader, "reviewed"),
        expires=signoff_date(reader, "expires"),
        entry=reader.where.lstrip("."),
        manifest=reader.path.name,
    )
    unknown = sorted(set(waiver.targets) - set(targets))
    if unknown:
        raise reader.fail(f"names targets the product lacks: {', '.join(unknown)}")
    return waiver


def signoff_sha256(reader: TableReader) -> tuple[str, ...]:
    """A sign-off's reviewed bytes (a waiver's, a licence rule's confirmation): one digest, or
    a list when it covers several files."""
    values = reader.text_list("sha256", required=False, one=True)
    if not all(re.fullmatch(r"[0-9a-f]{64}", v) for v in values):
        raise reader.fail("'sha256' must be 64 lower-case hex digits (the reviewed file's)")
    return values


def signoff_date(reader: TableReader, key: str) -> date | None:
    """A TOML date (reviewed = 2026-12-01) or the same as a string."""
    value = reader.table.get(key)
    if value is None or (isinstance(value, date) and not isinstance(value, datetime)):
        return value
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return date.fromisoformat(value)
    raise reader.fail(f"{key!r} must be a date, written YYYY-MM-DD")
