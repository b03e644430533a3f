"""The macOS channel: an app-bundle fragment laid out as codesign's rules for nested code and
data require, reproducible, links kept, and refusing code a byte broke after signing."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle._core.errors import IntegrityError
from ortbundle._core.memo import Memo
from ortbundle.channels import PackageInput
from ortbundle.channels.macos import MacosChannel
from ortbundle.config.project import CodeSigner
from ortbundle.licensing.attribution import ShippedFile
from ortbundle.stage.binaries import macho_tree_problems
from ortbundle.stage.binaries.install_names import fix_dylib
from tests.helpers.macho import write_dylib
from tests.helpers.packages import EPOCH, SETTINGS, make_package_input, write_stage_files

pytest.importorskip("apple_platform")

CORE = "libonnxruntime.1.32.0.dylib"
PKG = SETTINGS.package_name


def _signed(path: Path, install_id: str, **fields: object) -> bytes:
    write_dylib(path, install_id=install_id, **fields)  # type: ignore[arg-type]
    fix_dylib(path, install_id=install_id, label=path.name, signer=CodeSigner())
    return path.read_bytes()


def macos_input(root: Path) -> PackageInput:
    """A macos-arm64 stage as the build leaves it: signed dylibs, the id link, a metallib."""
    base = make_package_input(root / "base")
    stage = root / "macos-arm64"
    scratch = root / "scratch"
    contents = {
        "runtimes/stock/" + CORE: _signed(
            scratch / CORE, "libonnxruntime.1.dylib", exports=("OrtGetApiBase",)
        ),
        "plugins/ep-mlx/libonnxruntime_mlx_ep.dylib": _signed(
            scratch / "libonnxruntime_mlx_ep.dylib",
            "libonnxruntime_mlx_ep.dylib",
            needed=("/usr/lib/libSystem.B.dylib", "@rpath/libmlx.dylib"),
        ),
        "plugins/ep-mlx/libmlx.dylib": _signed(scratch / "libmlx.dylib", "libmlx.dylib"),
        "plugins/ep-mlx/mlx.metallib": b"MTLB" + b"\0" * 60,
        "licenses/onnxruntime/LICENSE": b"MIT License\n",
        "NOTICE": b"notice\n",
        "runtimes.json": b"{}\n",
        "models.json": b"{}\n",
        "models/sigmoid/model.onnx": b"onnx",
        "runtime_loader.py": b"print('loader')\n",
    }
    files = write_stage_files(stage, contents)
    (stage / "runtimes/stock/libonnxruntime.1.dylib").symlink_to(CORE)
    core = next(f for f in files if f.path.endswith(CORE))
    files.append(
        ShippedFile("runtimes/stock/libonnxruntime.1.dylib", core.size, core.sha256, 0o644, CORE)
    )
    return replace(
        base,
        target="macos-arm64",
        stage=stage,
        files=tuple(sorted(files, key=lambda f: f.path)),
        source_date_epoch=EPOCH,
    )


def test_the_zip_is_laid_out_for_contents_and_keeps_links(tmp_path: Path) -> None:
    package = macos_input(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    result = MacosChannel().generate(package, out)
    zipped = out / f"{PKG}-1.0.0-macos-arm64.zip"
    assert result.files == (zipped,)
    with zipfile.ZipFile(zipped) as archive:
        names = {i.filename: i for i in archive.infolist()}
        link = names[f"Frameworks/{PKG}/runtimes/stock/libonnxruntime.1.dylib"]
        assert link.external_attr >> 16 == 0o120777
        assert archive.read(link) == CORE.encode()
        resources = names[f"Frameworks/{PKG}/plugins/ep-mlx/Resources"]
        assert (
            archive.read(resources) == f"../../../../Resources/{PKG}/data/plugins/ep-mlx".encode()
        )
        code = names[f"Resources/{PKG}/runtimes"]
        assert archive.read(code) == f"../../Frameworks/{PKG}/runtimes".encode()
        assert {i.date_time for i in names.values()} == {(2023, 11, 14, 22, 13, 20)}
    files = sorted(n for n, i in names.items() if not n.endswith("/"))
    assert files == sorted(
        [
            f"Frameworks/{PKG}/plugins/ep-mlx/Resources",
            f"Frameworks/{PKG}/plugins/ep-mlx/libmlx.dylib",
            f"Frameworks/{PKG}/plugins/ep-mlx/libonnxruntime_mlx_ep.dylib",
            f"Frameworks/{PKG}/runtimes/stock/{CORE}",
            f"Frameworks/{PKG}/runtimes/stock/libonnxruntime.1.dylib",
            f"Resources/{PKG}/NOTICE",
            f"Resources/{PKG}/licenses/onnxruntime/LICENSE",
            f"Resources/{PKG}/models.json",
            f"Resources/{PKG}/models/sigmoid/model.onnx",
            f"Resources/{PKG}/data/plugins/ep-mlx/mlx.metallib",
            f"Resources/{PKG}/plugins",
            f"Resources/{PKG}/runtimes",
            f"Resources/{PKG}/runtime_loader.py",
            f"Resources/{PKG}/runtimes.json",
        ]
    )
    again = tmp_path / "again"
    again.mkdir()
    MacosChannel().generate(package, again)
    assert (again / zipped.name).read_bytes() == zipped.read_bytes()


@pytest.mark.skipif(shutil.which("unzip") is None, reason="needs unzip (Debian package unzip)")
def test_unzip_restores_the_layout_and_the_metallib_is_found_through_the_link(
    tmp_path: Path,
) -> None:
    package = macos_input(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (zipped,) = MacosChannel().generate(package, out).files
    contents = tmp_path / "Demo.app" / "Contents"
    contents.mkdir(parents=True)
    subprocess.run(["unzip", "-q", str(zipped), "-d", str(contents)], check=True)
    code = contents / "Frameworks" / PKG / "plugins" / "ep-mlx"
    # MLX's second lookup: <directory of libmlx.dylib>/Resources/mlx.metallib
    metallib = code / "Resources" / "mlx.metallib"
    assert metallib.read_bytes().startswith(b"MTLB")
    assert os.path.realpath(metallib).startswith(str((contents / "Resources").resolve()))
    # the loader's view from Resources/<package>/: the stage's own layout
    seen = contents / "Resources" / PKG / "runtimes" / "stock" / CORE
    assert seen.resolve() == (contents / "Frameworks" / PKG / "runtimes" / "stock" / CORE).resolve()
    link = contents / "Frameworks" / PKG / "runtimes" / "stock" / "libonnxruntime.1.dylib"
    assert link.is_symlink() and os.readlink(link) == CORE
    staged = package.stage / "runtimes" / "stock" / CORE
    digest = hashlib.sha256(link.read_bytes()).hexdigest()
    assert digest == hashlib.sha256(staged.read_bytes()).hexdigest()


def test_a_byte_changed_after_signing_is_refused(tmp_path: Path) -> None:
    package = macos_input(tmp_path)
    core = package.stage / "runtimes" / "stock" / CORE
    data = bytearray(core.read_bytes())
    data[0x3000] ^= 1
    core.write_bytes(bytes(data))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(IntegrityError, match="code digest mismatch") as caught:
        MacosChannel().generate(package, out)
    assert caught.value.file == f"runtimes/stock/{CORE}"
    assert list(out.iterdir()) == []


def test_a_warm_build_takes_the_archive_from_the_memo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check and the archive are a function of the stage's digests: the second build with
    the same stage parses no dylib and compresses nothing, and places the same bytes."""
    package = replace(macos_input(tmp_path), memo=Memo.for_build(tmp_path / "cache", release=False))
    checked: list[Path] = []
    real = macho_tree_problems

    def counting(directory: Path) -> list[str]:
        checked.append(directory)
        return real(directory)

    monkeypatch.setattr("ortbundle.channels.macos.macho_tree_problems", counting)
    outputs = []
    for run in ("first", "second"):
        out = tmp_path / run
        out.mkdir()
        outputs.append(MacosChannel().generate(package, out))
        assert len(checked) == 2, run  # runtimes/stock and plugins/ep-mlx, the first time only
    first, second = (o.files[0].read_bytes() for o in outputs)
    assert first == second and outputs[0].digests == outputs[1].digests
