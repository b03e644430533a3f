"""The Flatpak channel: schema-valid manifests, sha256-pinned sources, a build that really installs.

The schema is a verbatim copy of flatpak-builder's data/flatpak-manifest.schema.json (see
tests/data). Tests marked `tools` run flatpak-builder (and, for the end-to-end build, flatpak and
bubblewrap) with HOME, XDG_* and FLATPAK_* pointed at temporary directories, so they neither
read nor touch the host's installations and need no network.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import shutil
import stat
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ortbundle._core.errors import ConfigError, IntegrityError
from ortbundle.channels import ChannelOutput, PackageInput, PackagingSettings, ShippedRuntime
from ortbundle.channels.flatpak import FlatpakChannel, check_app_id, check_manifest
from tests.helpers.packages import SETTINGS, make_package_input

SCHEMA = json.loads(
    (Path(__file__).parent / "data" / "flatpak-manifest.schema.json").read_text(encoding="utf-8")
)
APP = "org.example.Demo.json"
MODULE = "demo-onnxruntime.module.json"
TARBALL = "demo-onnxruntime-1.0.0.tar.gz"
TEST_RUNTIME = "org.ortbundle.Test.Platform"
TEST_SDK = "org.ortbundle.Test.Sdk"
TEST_BRANCH = "1"
NO_GPU = (
    ShippedRuntime("openvino", "OpenVINO", "runtimes/openvino", False),
    ShippedRuntime("webgpu", "WebGPU", "runtimes/webgpu", False),
)


# Each Linux target with Flatpak's name for its machine (flatpak-builder --arch).
ARCHES = {"linux-x86_64": "x86_64", "linux-aarch64": "aarch64"}


def _generate(
    root: Path, target: str = "linux-x86_64", /, **overrides: object
) -> tuple[PackageInput, ChannelOutput]:
    package = make_package_input(root / "stage", target, **overrides)
    return package, FlatpakChannel().generate(package, root / "flatpak")


def _load(output: ChannelOutput, name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((output.directory / name).read_text(encoding="utf-8"))
    return loaded


@pytest.fixture
def generated(tmp_path: Path) -> tuple[PackageInput, ChannelOutput]:
    return _generate(tmp_path)


# --- what is written --------------------------------------------------------------------------


def test_writes_tarball_module_and_app_manifest(
    generated: tuple[PackageInput, ChannelOutput],
) -> None:
    _, output = generated
    assert output.channel == "flatpak"
    assert [f.name for f in output.files] == [TARBALL, MODULE, APP]
    assert sorted(p.name for p in output.directory.iterdir()) == sorted([TARBALL, MODULE, APP])
    for name in (MODULE, APP):
        text = (output.directory / name).read_text(encoding="utf-8")
        assert text.endswith("}\n") and text.startswith('{\n  "')

    app = _load(output, APP)
    assert list(app) == [
        "id",
        "runtime",
        "runtime-version",
        "sdk",
        "command",
        "finish-args",
        "modules",
    ]
    assert app["id"] == SETTINGS.flatpak_app_id
    assert app["runtime"] == SETTINGS.flatpak_runtime
    assert app["runtime-version"] == SETTINGS.flatpak_runtime_version
    assert app["sdk"] == SETTINGS.flatpak_sdk
    assert app["command"] == SETTINGS.flatpak_command
    assert app["modules"] == [MODULE]

    module = _load(output, MODULE)
    assert module["name"] == "demo-onnxruntime"
    assert module["buildsystem"] == "simple"
    assert module["build-options"] == {"no-debuginfo": True, "strip": False}
    digest = hashlib.sha256((output.directory / TARBALL).read_bytes()).hexdigest()
    assert module["sources"] == [{"type": "archive", "path": TARBALL, "sha256": digest}]
    commands = module["build-commands"]
    assert "cp -a NOTICE licenses runtime_loader.py runtimes runtimes.json " in commands[1]
    assert commands[1].endswith(" /app/lib/demo-onnxruntime/")
    assert commands[3] == (
        'cp -a NOTICE licenses "/app/share/licenses/${FLATPAK_ID:?}/demo-onnxruntime/"'
    )


def test_notes_say_what_a_packager_must_add(
    generated: tuple[PackageInput, ChannelOutput],
) -> None:
    _, output = generated
    notes = "\n".join(output.notes)
    assert MODULE in notes and TARBALL in notes
    assert "--device=dri" in notes
    assert "no Intel OpenCL driver" in notes and "falls back to the CPU" in notes


def test_opencl_note_only_when_opencl_is_needed(tmp_path: Path) -> None:
    package = make_package_input(tmp_path / "stage")
    no_opencl = tuple(e for e in package.externals if e.group != "opencl")
    output = FlatpakChannel().generate(replace(package, externals=no_opencl), tmp_path / "out")
    assert not any("OpenCL" in note for note in output.notes)


@pytest.mark.parametrize(
    ("runtimes", "gpu"),
    [
        (None, True),  # the helper's two GPU rungs
        ((NO_GPU[0], ShippedRuntime("webgpu", "WebGPU", "runtimes/webgpu", True)), True),
        (NO_GPU, False),
    ],
)
def test_device_dri_iff_a_gpu_rung(
    tmp_path: Path, runtimes: tuple[ShippedRuntime, ...] | None, gpu: bool
) -> None:
    overrides = {} if runtimes is None else {"runtimes": runtimes}
    _, output = _generate(tmp_path, **overrides)
    app = _load(output, APP)
    assert ("finish-args" in app) is gpu
    if gpu:
        assert app["finish-args"] == ["--device=dri"]
    assert _load(output, MODULE)["x-ortbundle"]["app-finish-args"] == (
        ["--device=dri"] if gpu else []
    )
    assert any("--device=dri" in note for note in output.notes) is gpu


def test_two_generates_give_identical_bytes(tmp_path: Path) -> None:
    _, first = _generate(tmp_path / "one")
    _, second = _generate(tmp_path / "two")
    assert [f.name for f in first.files] == [f.name for f in second.files]
    for a, b in zip(first.files, second.files, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
    for f in first.files:
        if f.suffix == ".json":
            text = f.read_text(encoding="utf-8")
            assert str(tmp_path) not in text and "/tmp" not in text and "/root" not in text


def test_a_stage_changed_after_the_build_is_not_packaged(tmp_path: Path) -> None:
    package = make_package_input(tmp_path / "stage")
    (package.stage / "runtimes/webgpu/libonnxruntime.so.1.0.0").write_bytes(b"changed")
    with pytest.raises(IntegrityError, match="changed or vanished"):
        FlatpakChannel().generate(package, tmp_path / "out")


# --- the schema -------------------------------------------------------------------------------


def _schema_errors(instance: object) -> list[str]:
    validator = jsonschema.Draft7Validator(SCHEMA)
    return [error.message for error in validator.iter_errors(instance)]


def test_app_manifest_is_schema_valid(generated: tuple[PackageInput, ChannelOutput]) -> None:
    _, output = generated
    assert _schema_errors(_load(output, APP)) == []


def test_module_file_is_schema_valid_inside_a_manifest(
    generated: tuple[PackageInput, ChannelOutput],
) -> None:
    # The schema describes whole manifests only (a module is $defs/module, reached through
    # "modules"; a string there is an unchecked file name), so the module is validated inlined
    # where the app manifest names it.
    _, output = generated
    app = _load(output, APP)
    module = _load(output, MODULE)
    assert _schema_errors({**app, "modules": [module]}) == []
    # The wrapper really reaches the module: an unknown key in it is reported.
    assert _schema_errors({**app, "modules": [{**module, "no-such-key": 1}]})


# --- our own sha256 check ---------------------------------------------------------------------


def test_check_manifest_accepts_what_we_generate(
    generated: tuple[PackageInput, ChannelOutput],
) -> None:
    _, output = generated
    check_manifest(_load(output, APP), base=output.directory)
    check_manifest(_load(output, MODULE), base=output.directory)
    check_manifest(_load(output, MODULE))  # no base: structure only, nothing to hash


def _module_with(source: dict[str, Any]) -> dict[str, Any]:
    return {"name": "m", "buildsystem": "simple", "build-commands": ["true"], "sources": [source]}


@pytest.mark.parametrize(
    "source",
    [
        {"type": "archive", "path": "a.tar.gz"},
        {"type": "archive", "url": "https://example.invalid/a.tar.gz", "sha512": "0" * 128},
        {"type": "archive", "path": "a.tar.gz", "sha256": ""},
        {"type": "file", "path": "a", "sha256": None},
        {"type": "git", "url": "https://example.invalid/r.git", "commit": "0" * 40},
        {"type": "dir", "path": "."},
    ],
)
def test_check_manifest_refuses_a_source_without_sha256(source: dict[str, Any]) -> None:
    with pytest.raises(IntegrityError, match="has no sha256"):
        check_manifest(_module_with(source))
    # ... however deep it sits in an app manifest.
    app = {
        "id": "org.example.App",
        "modules": [{"name": "outer", "modules": [_module_with(source)]}],
    }
    with pytest.raises(IntegrityError, match=r"modules\[0\] .*modules\[0\].*has no sha256"):
        check_manifest(app)


def test_check_manifest_refuses_malformed_sha256_and_unreadable_includes(tmp_path: Path) -> None:
    with pytest.raises(IntegrityError, match="malformed sha256"):
        check_manifest(_module_with({"type": "archive", "path": "a", "sha256": "AB" * 32}))
    with pytest.raises(IntegrityError, match="without a base"):
        check_manifest({"id": "org.example.App", "modules": ["m.module.json"]})
    with pytest.raises(IntegrityError, match="not readable JSON"):
        check_manifest({"id": "org.example.App", "modules": ["m.module.json"]}, base=tmp_path)
    with pytest.raises(IntegrityError, match="no 'modules' list"):
        check_manifest({"id": "org.example.App"})


def test_check_manifest_follows_includes_and_hashes_local_sources(
    generated: tuple[PackageInput, ChannelOutput],
) -> None:
    _, output = generated
    app = _load(output, APP)
    # A source list in its own file, without sha256, is found through the module.
    module = _load(output, MODULE)
    module["sources"] = ["extra-sources.json"]
    (output.directory / "extra-sources.json").write_text(
        json.dumps([{"type": "file", "path": TARBALL}]), encoding="utf-8"
    )
    (output.directory / MODULE).write_text(json.dumps(module), encoding="utf-8")
    with pytest.raises(IntegrityError, match=r"extra-sources\.json.*has no sha256"):
        check_manifest(app, base=output.directory)


def test_check_manifest_notices_an_altered_tarball(
    generated: tuple[PackageInput, ChannelOutput],
) -> None:
    _, output = generated
    with (output.directory / TARBALL).open("ab") as handle:
        handle.write(b"\0")
    with pytest.raises(IntegrityError, match="does not match its sha256"):
        check_manifest(_load(output, APP), base=output.directory)


# --- names and injection ----------------------------------------------------------------------

VALID_IDS = [
    "org.example.Demo",
    "org.example.demo-app",
    "org.example.-Demo",  # Flatpak allows '-' first in the last element
    "org._1.x",
    "io.github.some_user.App2",
    "a." * 126 + "bcd",  # 255 bytes
]
INVALID_IDS = [
    "",
    "org.example",
    "org..Demo",
    ".org.example.Demo",
    "org.example.Demo.",
    "org.exa-mple.Demo",
    "org.example.9Demo",
    "1org.example.Demo",
    "org.example.Démo",
    "org.example.Demo ",
    "org.example.Demo\n",
    'org.example.Demo","finish-args":["--filesystem=host',
    "org.example.$(touch pwned)",
    "org/example/Demo",
    "a." * 126 + "bcde",  # 256 bytes
]


@pytest.mark.parametrize("app_id", VALID_IDS)
def test_valid_app_ids_are_accepted(app_id: str) -> None:
    check_app_id(app_id)


@pytest.mark.parametrize("app_id", INVALID_IDS)
def test_invalid_app_ids_are_refused(tmp_path: Path, app_id: str) -> None:
    with pytest.raises(ConfigError, match="not a valid Flatpak name"):
        check_app_id(app_id)
    settings = replace(SETTINGS, flatpak_app_id=app_id)
    with pytest.raises(ConfigError):
        _generate(tmp_path, settings=settings)
    assert not (tmp_path / "flatpak").exists() or not any((tmp_path / "flatpak").iterdir())


@pytest.mark.parametrize(
    "settings",
    [
        replace(SETTINGS, package_name="demo onnxruntime"),
        replace(SETTINGS, package_name="../demo"),
        replace(SETTINGS, package_name="demo;rm -rf /"),
        replace(SETTINGS, flatpak_runtime="org.freedesktop"),
        replace(SETTINGS, flatpak_sdk="org.freedesktop.Sdk//24.08"),
        replace(SETTINGS, flatpak_runtime_version=".24"),
        replace(SETTINGS, flatpak_runtime_version="24.08\n"),
        replace(SETTINGS, flatpak_command="demo --flag"),
        replace(SETTINGS, flatpak_command=""),
    ],
)
def test_unusable_settings_are_refused(tmp_path: Path, settings: PackagingSettings) -> None:
    with pytest.raises(ConfigError):
        _generate(tmp_path, settings=settings)


def test_wrong_target_and_bad_version_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="packages linux-x86_64"):
        FlatpakChannel().generate(
            make_package_input(tmp_path / "w", "windows-x86_64"), tmp_path / "o1"
        )
    with pytest.raises(ConfigError, match="version"):
        _generate(tmp_path / "v", version="1.0/../../x")


INJECTION = (
    '"], "finish-args": ["--filesystem=host"], "x": ["\n'
    "$(touch pwned) `id` ${HOME} \\ \u2028 </script> — é"
)


def test_injection_strings_in_free_text_stay_inert(tmp_path: Path) -> None:
    nul = INJECTION + "\u0000"  # json escapes it; C readers would stop there (x- field only)
    _, output = _generate(
        tmp_path, description=nul, product=INJECTION, url=INJECTION, runtimes=NO_GPU
    )
    app = _load(output, APP)
    module = _load(output, MODULE)
    assert "finish-args" not in app
    meta = module["x-ortbundle"]
    assert meta["product"] == meta["url"] == INJECTION and meta["description"] == nul
    assert all("pwned" not in command for command in module["build-commands"])
    raw = (output.directory / MODULE).read_bytes()
    assert raw.isascii() and b"\\u2028" in raw and b"\\u0000" in raw  # escaped, never raw
    assert _schema_errors({**app, "modules": [module]}) == []
    check_manifest(app, base=output.directory)


# --- flatpak-builder ------------------------------------------------------------------------


_APT = {"flatpak-builder": "flatpak-builder", "flatpak": "flatpak", "bwrap": "bubblewrap"}


def _need(*tools: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            package = _APT.get(tool, "libc-bin")
            pytest.skip(f"{tool} is not installed (Debian/Ubuntu: apt install {package})")


def _isolated_env(home: Path, *, fatal_warnings: bool = True) -> dict[str, str]:
    """Point every place flatpak looks at (installations, config, caches) into `home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "FLATPAK_", "G_"))}
    dirs = {
        "HOME": home,
        "XDG_DATA_HOME": home / "data",
        "XDG_CACHE_HOME": home / "cache",
        "XDG_CONFIG_HOME": home / "config",
        "FLATPAK_USER_DIR": home / "flatpak-user",
        "FLATPAK_SYSTEM_DIR": home / "flatpak-system",
        "FLATPAK_CONFIG_DIR": home / "flatpak-config",
    }
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    env.update({key: str(path) for key, path in dirs.items()})
    env["LC_ALL"] = "C.UTF-8"
    if fatal_warnings:
        env["G_DEBUG"] = "fatal-warnings"
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=300,
        check=False,
    )


@pytest.mark.tools
def test_flatpak_builder_reads_the_manifest(tmp_path: Path) -> None:
    _need("flatpak-builder")
    _, output = _generate(tmp_path, description=INJECTION)
    env = _isolated_env(tmp_path / "home")
    shown = _run(["flatpak-builder", "--show-manifest", str(output.directory / APP)], env, tmp_path)
    assert shown.returncode == 0, shown.stderr
    expanded = json.loads(shown.stdout)
    module = _load(output, MODULE)
    # The include was followed, and flatpak-builder parsed exactly our values (it omits
    # options left at their default, like strip: false).
    (shown_module,) = expanded["modules"]
    assert shown_module["build-options"] == {"no-debuginfo": True}
    assert {k: v for k, v in shown_module.items() if k != "build-options"} == {
        k: v for k, v in module.items() if k != "build-options"
    }
    assert expanded["finish-args"] == ["--device=dri"]
    assert expanded["modules"][0]["x-ortbundle"]["description"] == INJECTION

    # Control: G_DEBUG=fatal-warnings does turn an unknown key into a failure.
    (output.directory / MODULE).write_text(
        json.dumps({**module, "no-such-key": 1}), encoding="utf-8"
    )
    bad = _run(["flatpak-builder", "--show-manifest", str(output.directory / APP)], env, tmp_path)
    assert bad.returncode != 0 and "no-such-key" in bad.stderr


def _download_only(
    manifest: Path, home: Path, arch: str = "x86_64"
) -> subprocess.CompletedProcess[str]:
    # No runtime or SDK is installed: flatpak-builder prints "... not installed" while it
    # computes its cache key and carries on; --download-only stops before it needs them.
    return _run(
        [
            "flatpak-builder",
            "--download-only",
            "--disable-rofiles-fuse",
            f"--arch={arch}",
            f"--state-dir={home / 'state'}",
            str(home / "build"),
            str(manifest),
        ],
        _isolated_env(home),
        manifest.parent,
    )


def test_the_module_builds_only_on_its_targets_arch(tmp_path: Path) -> None:
    for target, arch in ARCHES.items():
        _, output = _generate(tmp_path / target, target)
        assert _load(output, MODULE)["only-arches"] == [arch]


@pytest.mark.tools
@pytest.mark.parametrize("target", list(ARCHES))
def test_flatpak_builder_fetches_the_module_on_its_arch_only(tmp_path: Path, target: str) -> None:
    """flatpak-builder --arch: on the module's own arch it fetches and checks the tarball (a
    changed byte fails), on the other it skips the module (it is not that machine's code)."""
    _need("flatpak-builder")
    _, output = _generate(tmp_path, target)
    manifest = output.directory / APP
    shown = _run(
        ["flatpak-builder", "--show-manifest", str(manifest)],
        _isolated_env(tmp_path / "h"),
        tmp_path,
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["modules"][0]["only-arches"] == [ARCHES[target]]
    own = _download_only(manifest, tmp_path / "home-ok", ARCHES[target])
    assert own.returncode == 0, own.stderr
    tarball = output.directory / TARBALL
    data = bytearray(tarball.read_bytes())
    data[len(data) // 2] ^= 0x01
    tarball.write_bytes(bytes(data))
    bad = _download_only(manifest, tmp_path / "home-bad", ARCHES[target])
    assert bad.returncode != 0 and "Wrong sha256" in bad.stderr, bad.stderr
    (other,) = set(ARCHES.values()) - {ARCHES[target]}
    skipped = _download_only(manifest, tmp_path / "home-other", other)
    assert skipped.returncode == 0, skipped.stderr  # the changed tarball is never read


@pytest.mark.tools
@pytest.mark.parametrize("how", ["standalone", "included"])
def test_flatpak_builder_checks_our_sha256(tmp_path: Path, how: str) -> None:
    _need("flatpak-builder")
    _, output = _generate(tmp_path)
    if how == "standalone":
        manifest = output.directory / APP
    else:  # an app's own manifest elsewhere includes the module file, as the note says
        app_dir = tmp_path / "someone" / "app"
        app_dir.mkdir(parents=True)
        manifest = app_dir / "org.someone.App.json"
        include = os.path.relpath(output.directory / MODULE, app_dir)
        app = {**_load(output, APP), "id": "org.someone.App", "modules": [include]}
        manifest.write_text(json.dumps(app, indent=2) + "\n", encoding="utf-8")

    ok = _download_only(manifest, tmp_path / "home-ok")
    assert ok.returncode == 0, ok.stderr

    tarball = output.directory / TARBALL
    data = bytearray(tarball.read_bytes())
    data[len(data) // 2] ^= 0x01
    tarball.write_bytes(bytes(data))
    bad = _download_only(manifest, tmp_path / "home-bad")
    assert bad.returncode != 0
    assert "Wrong sha256" in bad.stderr and TARBALL in bad.stderr, bad.stderr


@pytest.mark.tools
@pytest.mark.parametrize(
    "app_id", [*VALID_IDS[:5], *[i for i in INVALID_IDS if i and "\n" not in i]]
)
def test_app_id_rules_match_flatpak(tmp_path: Path, app_id: str) -> None:
    # `flatpak build-init` checks the name before it looks for the (absent) SDK.
    _need("flatpak")
    result = _run(
        ["flatpak", "build-init", str(tmp_path / "d"), app_id, TEST_SDK, TEST_RUNTIME, "1"],
        _isolated_env(tmp_path / "home", fatal_warnings=False),
        tmp_path,
    )
    flatpak_refuses = "not a valid application name" in result.stderr
    try:
        check_app_id(app_id)
        we_refuse = False
    except ConfigError:
        we_refuse = True
    assert we_refuse == flatpak_refuses, result.stderr


# --- an end-to-end build against a tiny local runtime ------------------------------------------


def _copy_with_libraries(tools: list[str], files: Path) -> None:
    """Copy host programs and the shared libraries they load into a runtime's /usr."""
    (files / "bin").mkdir(parents=True)
    (files / "lib").mkdir()
    for tool in tools:
        program = shutil.which(tool)
        assert program is not None
        shutil.copy2(os.path.realpath(program), files / "bin" / tool)
        listed = subprocess.run(["ldd", program], capture_output=True, text=True, check=True).stdout
        for token in listed.split():
            if not token.startswith("/"):
                continue
            library = Path(token)
            # The interpreter keeps its absolute path (/lib64/ld-linux-…); flatpak links
            # /lib64 → /usr/lib64. Everything else goes to /usr/lib, on the default path.
            if library.name.startswith("ld-linux"):
                dest = files / library.parent.relative_to("/")
            else:
                dest = files / "lib"
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.realpath(library), dest / library.name)


BWRAP_PROBE = ["bwrap", "--unshare-pid", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]


@pytest.fixture(scope="module")
def local_runtime(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Platform and an Sdk holding only sh, cp and install, installed in a private user dir.

    Returns the home to pass to _isolated_env so flatpak-builder finds them.

    It stands in for org.freedesktop.Platform/Sdk, which cannot be downloaded here, so that
    flatpak-builder runs our build-commands in its real sandbox and finishes the app.
    """
    _need("flatpak-builder", "flatpak", "bwrap", "ldd")
    probe = subprocess.run([*BWRAP_PROBE, "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"bubblewrap cannot create a sandbox here: {probe.stderr.strip()}")
    root = tmp_path_factory.mktemp("flatpak-runtime")
    home = root / "home"
    env = _isolated_env(home, fatal_warnings=False)
    for ref in (TEST_RUNTIME, TEST_SDK):
        tree = root / ref
        _copy_with_libraries(["sh", "cp", "install"], tree / "files")
        (tree / "metadata").write_text(
            f"[Runtime]\nname={ref}\n"
            f"runtime={TEST_RUNTIME}/x86_64/{TEST_BRANCH}\nsdk={TEST_SDK}/x86_64/{TEST_BRANCH}\n",
            encoding="utf-8",
        )
        exported = _run(
            [
                "flatpak",
                "build-export",
                "--files=files",
                str(root / "repo"),
                str(tree),
                TEST_BRANCH,
            ],
            env,
            root,
        )
        assert exported.returncode == 0, exported.stderr
    for args in (
        ["remote-add", "--no-gpg-verify", "local", (root / "repo").as_uri()],
        [
            "install",
            "--noninteractive",
            "-y",
            "local",
            *(f"{r}//{TEST_BRANCH}" for r in (TEST_RUNTIME, TEST_SDK)),
        ],
    ):
        done = _run(["flatpak", "--user", *args], env, root)
        assert done.returncode == 0, done.stderr
    return home


# The local runtime's settings; build-finish needs the command to exist: the stage's loader is.
LOCAL_SETTINGS = replace(
    SETTINGS,
    flatpak_runtime=TEST_RUNTIME,
    flatpak_sdk=TEST_SDK,
    flatpak_runtime_version=TEST_BRANCH,
    flatpak_command="/app/lib/demo-onnxruntime/runtime_loader.py",
)


def build_app(output: ChannelOutput, home: Path, work: Path) -> Path:
    """flatpak-builder builds and finishes the app manifest against the local runtime in
    `home`; returns the build directory."""
    build = work / "build"
    result = _run(
        [
            "flatpak-builder",
            "--disable-rofiles-fuse",
            "--disable-cache",
            "--force-clean",
            f"--state-dir={work / 'state'}",
            str(build),
            str(output.directory / APP),
        ],
        _isolated_env(home),
        output.directory,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return build


def _entries(root: Path) -> set[str]:
    return {
        p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir() or p.is_symlink()
    }


@pytest.mark.tools
@pytest.mark.parametrize("gpu", [True, False])
def test_flatpak_builder_builds_and_finishes_the_app(
    tmp_path: Path, local_runtime: Path, gpu: bool
) -> None:
    overrides: dict[str, object] = {"settings": LOCAL_SETTINGS}
    if not gpu:
        overrides["runtimes"] = NO_GPU
    package, output = _generate(tmp_path, **overrides)
    build = build_app(output, local_runtime, tmp_path)

    installed = build / "files" / "lib" / "demo-onnxruntime"
    assert _entries(installed) == {f.path for f in package.files}
    for shipped in package.files:
        path = installed / shipped.path
        if shipped.link_to is not None:
            assert path.is_symlink() and os.readlink(path) == shipped.link_to
        else:
            assert not path.is_symlink()
            assert hashlib.sha256(path.read_bytes()).hexdigest() == shipped.sha256, shipped.path
            assert stat.S_IMODE(path.stat().st_mode) == shipped.mode, shipped.path

    licenses = build / "files" / "share" / "licenses" / SETTINGS.flatpak_app_id / "demo-onnxruntime"
    texts = {f.path for f in package.files if f.path == "NOTICE" or f.path.startswith("licenses/")}
    assert _entries(licenses) == texts
    for text in texts:
        assert (licenses / text).read_bytes() == (package.stage / text).read_bytes()

    metadata = configparser.ConfigParser()
    metadata.read(build / "metadata", encoding="utf-8")
    assert metadata["Application"]["name"] == SETTINGS.flatpak_app_id
    devices = metadata.get("Context", "devices", fallback="")
    assert (devices == "dri;") is gpu
