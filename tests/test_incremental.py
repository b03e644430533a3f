"""What the speed relies on: no-op builds touch nothing, a changed pin rebuilds only its own
runtime, memoised work is checked before use, and parallel equals serial."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import ortbundle._core.fsio
import ortbundle.fetch.archives
import ortbundle.stage.staging
import ortbundle.stage.step
from ortbundle._core.progress import Reporter
from ortbundle.evidence.names import SUMMARY_NAME
from ortbundle.pipeline.build import build
from ortbundle.stage.staging import StagedRuntime
from tests.helpers.probe import run_python
from tests.helpers.project import FakeProject
from tests.helpers.toml_edit import set_key
from tests.helpers.wheels import make_wheel, sha256_of


def stats(tree: Path) -> dict[str, tuple[int, int, int]]:
    out = {}
    for path in sorted(tree.rglob("*")):
        info = path.lstat()
        out[path.relative_to(tree).as_posix()] = (info.st_size, info.st_mtime_ns, info.st_ino)
    return out


def contents(tree: Path) -> dict[str, bytes]:
    return {
        p.relative_to(tree).as_posix(): (
            os.readlink(p).encode() if p.is_symlink() else p.read_bytes()
        )
        for p in sorted(tree.rglob("*"))
        if (p.is_file() or p.is_symlink()) and p.name != SUMMARY_NAME  # it holds timings
    }


def count_staging(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []
    real = ortbundle.stage.staging.stage_runtime

    def spy(recipe: object, target: object, *args: object, **kwargs: object) -> StagedRuntime:
        calls.append((recipe.name, target.name))  # type: ignore[attr-defined]
        return real(recipe, target, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ortbundle.stage.step, "stage_runtime", spy)
    return calls


def test_a_no_op_build_touches_no_file(written: FakeProject, reporter: Reporter) -> None:
    first = build(written.project, written.options(), reporter)
    before = stats(first.version_dir)
    again = build(written.project, written.options(), reporter)
    assert again.up_to_date is not None
    assert "nsis: audit passed" in again.up_to_date["audit"]
    assert stats(first.version_dir) == before


def test_an_altered_output_is_rebuilt(written: FakeProject, reporter: Reporter) -> None:
    first = build(written.project, written.options(), reporter)
    good = contents(first.version_dir)
    notice = first.version_dir / "linux-x86_64" / "NOTICE"
    notice.write_text("edited by hand\n")
    again = build(written.project, written.options(), reporter)
    assert again.up_to_date is None
    assert contents(again.version_dir) == good


def test_a_changed_input_is_not_a_no_op(written: FakeProject, reporter: Reporter) -> None:
    build(written.project, written.options(), reporter)
    manifest = written.root / "manifests" / "fakeproduct.toml"
    set_key(manifest, "product.description", "Another text")
    assert build(written.project, written.options(), reporter).up_to_date is None


def test_a_changed_pin_restages_only_its_own_runtime(
    written: FakeProject, reporter: Reporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = count_staging(monkeypatch)
    build(written.project, written.options(), reporter)
    assert sorted(calls) == [("fake", "linux-x86_64"), ("fake", "windows-x86_64")]
    # a new Windows wheel: same recipe shape, other bytes, new pin
    calls.clear()
    members = dict(written.windows)
    members["onnxruntime/capi/dep.dll"] = members["onnxruntime/capi/dep.dll"] + b"\0" * 64
    new_wheel = make_wheel(
        written.root / "wheels2" / written.wheels["windows-x86_64"].name,
        "onnxruntime-fake",
        "1.0.0",
        members,
    )
    written.wheels["windows-x86_64"] = new_wheel
    written.server.add("onnxruntime-fake", new_wheel)
    recipe = written.root / "recipes" / "fake.toml"
    old_pin = sha256_of(written.root / "wheels" / new_wheel.name)
    recipe.write_text(recipe.read_text().replace(old_pin, sha256_of(new_wheel)))
    result = build(written.project, written.options(), reporter)
    assert calls == [("fake", "windows-x86_64")]  # Linux came from the memo
    windows = next(t for t in result.targets if t.target == "windows-x86_64")
    assert (windows.stage / "runtimes/fake/dep.dll").read_bytes().endswith(b"\0" * 64)


def test_an_altered_memo_entry_is_rebuilt_not_used(
    written: FakeProject, reporter: Reporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = build(written.project, written.options(), reporter)
    good = contents(first.version_dir)
    for kept in (written.root / "cache" / "stages").rglob("libdep.so.2"):
        kept.write_bytes(b"corrupted")
    calls = count_staging(monkeypatch)
    (first.version_dir / "NOTICE").touch()  # defeat the whole-build no-op
    result = build(written.project, written.options(), reporter)
    assert ("fake", "linux-x86_64") in calls
    assert contents(result.version_dir) == good


@pytest.mark.slow
def test_parallel_and_serial_builds_are_identical(
    written: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    serial = build(
        written.project.__class__.at(written.root, tmp_path / "serial"),
        written.options(jobs=1, cache_dir=tmp_path / "cache1"),
        reporter,
    )
    parallel = build(
        written.project.__class__.at(written.root, tmp_path / "parallel"),
        written.options(jobs=2, cache_dir=tmp_path / "cache2"),
        reporter,
    )
    assert contents(serial.version_dir) == contents(parallel.version_dir)


@pytest.mark.slow
def test_a_memo_naming_a_file_outside_its_runtime_is_discarded(
    fake: FakeProject, reporter: Reporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    fake.write()
    first = build(fake.project, fake.options(), reporter)
    for meta in (fake.root / "cache" / "stages").rglob("closure.json"):
        record = json.loads(meta.read_text())
        record["staged"]["closure"]["links"].append(["../../escaped", "x"])
        meta.write_text(json.dumps(record))
    calls = count_staging(monkeypatch)
    (first.version_dir / "NOTICE").touch()  # defeat the whole-build no-op
    result = build(fake.project, fake.options(), reporter)
    assert sorted(calls) == [("fake", "linux-x86_64"), ("fake", "windows-x86_64")]
    assert not list(result.version_dir.parent.rglob("escaped"))


# A build in a fresh process (so sys.modules says what this one build imported).
_PROBE = """
import json, sys
from pathlib import Path
from ortbundle.cli import run_build
from ortbundle.config.project import BuildOptions
root, dist, cache, index = sys.argv[1:5]
options = BuildOptions(
    product="fakeproduct", index_url=index, cache_dir=Path(cache),
    environ=json.loads(sys.argv[5]), jobs=2,
)
run_build(options, root=Path(root), dist=Path(dist))
print(json.dumps(sorted(sys.modules)))
"""


def _probe_build(written: FakeProject, dist: Path) -> tuple[str, set[str]]:
    """(what the build printed, the modules it imported)."""
    import json

    out = run_python(
        _PROBE,
        str(written.root),
        str(dist),
        str(written.root / "cache"),
        written.server.url,
        json.dumps(written.environ),
    )
    return out, set(json.loads(out.strip().splitlines()[-1]))


# What a no-op build must not import: the HTTP stack, archives and binaries, the evidence and
# presentation libraries, the runtime loader, and every pipeline module (prepare_build decides
# from plan data alone).
_HEAVY = (
    "requests",
    "rich",
    "elftools",
    "pefile",
    "jinja2",
    "cryptography",
    "license_expression",
    "ortbundle.pipeline.build",
    "ortbundle.stage.staging",
    "ortbundle.stage.closure",
    "ortbundle.fetch.cache",
    "ortbundle.fetch.config",
    "ortbundle.fetch.download",
    "ortbundle.payload.loader",
)


@pytest.mark.slow
def test_a_no_op_build_imports_nothing_heavy(written: FakeProject, reporter: Reporter) -> None:

    build(written.project, written.options(), reporter)
    stdout, modules = _probe_build(written, written.root / "dist")
    assert "up to date" in stdout
    assert sorted(m for m in _HEAVY if m in modules) == []


def _memo_files(cache: Path, name: str) -> list[Path]:
    return sorted((cache / "stages").rglob(name))


@pytest.mark.slow
def test_licence_texts_of_a_restored_runtime_do_not_open_its_wheel(
    written: FakeProject, reporter: Reporter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = build(written.project, written.options(), reporter)
    good = contents(first.version_dir)
    opened: list[Path] = []
    real = ortbundle.fetch.archives.ZipArchive

    def spy(path: Path, *args: object, **kwargs: object) -> object:
        opened.append(path)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ortbundle.stage.staging, "ZipArchive", spy)
    again = build(
        written.project.__class__.at(written.root, tmp_path / "d2"), written.options(), reporter
    )
    assert opened == []
    assert contents(again.version_dir) == good


def test_an_altered_member_memo_entry_is_read_from_the_wheel_again(
    written: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    first = build(written.project, written.options(), reporter)
    good = contents(first.version_dir)
    entries = [
        p for p in (written.root / "cache" / "outputs" / "members").rglob("*") if p.is_file()
    ]
    texts = [p for p in entries if p.suffix != ".json"]
    assert texts
    for entry in texts:
        entry.write_bytes(b"not the licence\n")
    again = build(
        written.project.__class__.at(written.root, tmp_path / "d2"), written.options(), reporter
    )
    assert contents(again.version_dir) == good


def test_templates_are_compiled_once_per_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second process renders from the compiled form kept under the cache."""
    script = (
        "import sys, jinja2\n"
        "from ortbundle._core import templating\n"
        "if sys.argv[1] == 'cached':\n"
        "    def refuse(*args, **kwargs): raise AssertionError('compiled again')\n"
        "    jinja2.Environment.compile = refuse\n"
        "try:\n"
        "    templating.render('NOTICE.j2', {})\n"
        "except jinja2.UndefinedError:\n"
        "    pass  # compiled (or loaded) before rendering: that is all this looks at\n"
    )
    env = {**os.environ, "ORTBUNDLE_CACHE_DIR": str(tmp_path / "cache")}
    root = Path(__file__).resolve().parents[1]
    import subprocess
    import sys

    for mode in ("first", "cached"):
        run = subprocess.run(
            [sys.executable, "-c", script, mode], cwd=root, env=env, capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr
    assert list((tmp_path / "cache" / "templates").iterdir())


def test_a_listed_stage_file_is_not_hashed_again_until_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Channels trust the stamp the build took when it listed the stage; a write (even one
    that keeps the size and puts the mtime back) moves ctime, and the file is hashed again."""
    import dataclasses

    import ortbundle.channels as channels
    from ortbundle._core.errors import IntegrityError
    from tests.helpers.packages import make_package_input

    package = make_package_input(tmp_path)
    stamped = tuple(
        dataclasses.replace(
            f, stamp=ortbundle._core.fsio.stat_record((package.stage / f.path).lstat())
        )
        for f in package.files
        if f.link_to is None
    )
    hashed: list[Path] = []
    real = ortbundle._core.fsio.sha256_file

    def spy(path: Path) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(channels, "sha256_file", spy)
    for shipped in stamped:
        channels.check_staged(package, shipped, None)
    assert hashed == []
    victim = stamped[0]
    path = package.stage / victim.path
    before = path.stat()
    path.write_bytes(b"X" * victim.size)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(IntegrityError, match="changed or vanished"):
        channels.check_staged(package, victim, None)
    assert hashed == [path]


def test_a_warm_build_reads_no_library_and_parses_no_licence_again(
    written: FakeProject, tmp_path: Path
) -> None:
    """Everything a warm build would parse (ELF and PE files, licence expressions) comes from
    the cache: pyelftools, pefile and license_expression stay unimported."""

    def build_into(dist: Path) -> set[str]:
        return _probe_build(written, dist)[1]

    cold = build_into(tmp_path / "first")
    assert {"elftools", "pefile", "license_expression"} <= cold  # the probe can see them
    warm = build_into(tmp_path / "second")
    assert sorted(m for m in ("elftools", "pefile", "license_expression") if m in warm) == []
    # output to a log (no terminal): plain lines, so rich (live bars, tables) is not imported;
    # every text file renders as the last build rendered it, so jinja2 is not imported either
    assert "rich" not in warm and "jinja2" not in warm
