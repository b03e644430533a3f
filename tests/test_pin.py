"""pin and its bump report, against a real local index publishing a component at two releases."""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ortbundle._core.errors import FetchError, IntegrityError
from ortbundle._core.progress import Reporter
from ortbundle.fetch.cache import Cache
from ortbundle.tools.pin import (
    PinOptions,
    PinResult,
    SourceMove,
    TargetBump,
    check_pins,
    pin,
    rewrite_recipe,
)
from tests.helpers.elf import make_elf
from tests.helpers.index_server import IndexServer
from tests.helpers.pe import make_pe
from tests.helpers.project import CORE_EXPORTS, CPU, FAST_RETRY, FakeProject, linux_members
from tests.helpers.wheels import make_wheel, sha256_of

REPO = Path(__file__).resolve().parents[1]
PROJECT = "onnxruntime-fake"
LINUX_OLD = "onnxruntime_fake-1.0.0-cp311-cp311-manylinux_2_28_x86_64.whl"
WINDOWS_OLD = "onnxruntime_fake-1.0.0-cp311-cp311-win_amd64.whl"
EXTRA_OLD = "fake_extras-2.0.0-py3-none-win_amd64.whl"
# 1.1.0 has no manylinux_2_28 wheel: the closest same-family file is 2_31 (not 2_34, not musl,
# not another Python).
LINUX_NEW = "onnxruntime_fake-1.1.0-cp311-cp311-manylinux_2_31_x86_64.whl"
LINUX_DECOYS = (
    "onnxruntime_fake-1.1.0-cp311-cp311-manylinux_2_34_x86_64.whl",
    "onnxruntime_fake-1.1.0-cp311-cp311-musllinux_1_2_x86_64.whl",
    "onnxruntime_fake-1.1.0-cp312-cp312-manylinux_2_28_x86_64.whl",
)
WINDOWS_NEW = "onnxruntime_fake-1.1.0-cp311-cp311-win_amd64.whl"
EXTRA_NEW = "fake_extras-2.1.0-py3-none-win_amd64.whl"
LICENSE = b"MIT License\n\nCopyright (c) Fake Corp\n"

RECIPE = """\
# A synthetic runtime, 1.0.0: every comment and blank line here must survive `pin`.
# It borrows fake-extras 2.0.0 on Windows.

[component]
name = "fake"
kind = "runtime"
label = "Fake"  # a trailing comment
version = "1.0.0"
description = "Fake runtime 1.0.0 with fake-extras 2.0.0 (not 11.0.0)"
providers = ["CPUExecutionProvider"]
gpu_vendors = []

[sources.linux]
pypi = {{ project = "onnxruntime-fake", version = "1.0.0", filename = "{linux}" }}
sha256 = "{linux_sha}"   # from the index
size = {linux_size}

# The Windows wheel: no size pinned yet, pin adds it beside the digest.
[sources.windows]
pypi = {{ project = "onnxruntime-fake", version = "1.0.0", filename = "{windows}" }}
sha256 = "{windows_sha}"

[sources.extra]
pypi = {{ project = "fake-extras", version = "2.0.0", filename = "{extra}" }}
sha256 = "{extra_sha}"
size = {extra_size}

# ---------------------------------------------------------------------------------------------
[targets.linux-x86_64]
entry = "libonnxruntime.so.*.*.*"
roots = ["libonnxruntime.so.*", "libprovider.so"]

[[targets.linux-x86_64.take]]
source = "linux"
libraries = ["onnxruntime/capi/*.so", "onnxruntime/capi/*.so.*"]

[[targets.linux-x86_64.drop]]
names = ["onnxruntime_pybind11_state*"]
reason = "Python binding"

[[targets.linux-x86_64.licenses]]
component = "onnxruntime-fake"
version = "1.0.0"
expression = "MIT"
files = ["lib*"]
texts = [
    {{ source = "linux", member = "onnxruntime/LICENSE" }},
]

# ---------------------------------------------------------------------------------------------
[targets.windows-x86_64]
entry = "onnxruntime.dll"
roots = ["onnxruntime.dll", "extra.dll"]

[[targets.windows-x86_64.take]]
source = "windows"
libraries = ["onnxruntime/capi/*.dll", "onnxruntime/capi/*.pyd"]

[[targets.windows-x86_64.take]]
source = "extra"
libraries = ["fake_extras/libs/*.dll"]

[[targets.windows-x86_64.drop]]
names = ["*.pyd"]
reason = "Python binding"

[[targets.windows-x86_64.licenses]]
component = "onnxruntime-fake"
version = "1.0.0"
expression = "MIT"
files = ["onnxruntime.dll", "dep.dll", "Delayed.dll", "newlib.dll"]
texts = [{{ source = "windows", member = "onnxruntime/LICENSE" }}]

[[targets.windows-x86_64.licenses]]
component = "fake-extras"
version = "2.0.0"
purl = "pkg:pypi/fake-extras@2.0.0"
expression = "Apache-2.0"
files = ["extra.dll"]
texts = [{{ source = "extra", member = "fake_extras-2.0.0.dist-info/licenses/LICENSE" }}]

[[targets.windows-x86_64.licenses]]
component = "bundled-thing"
# Shipped inside the ORT wheel; its version is the wheel's.
version = "bundled with onnxruntime-fake 1.0.0"
expression = "MIT"
files = ["bundled.dll"]
texts = [{{ file = "bundled-LICENSE.txt" }}]
"""


def windows_members(version: str) -> dict[str, bytes]:
    if version == "1.0.0":
        return {
            "onnxruntime/capi/onnxruntime.dll": make_pe(
                imports=("KERNEL32.dll", "dep.dll", "MSVCP140.dll", "bundled.dll"),
                delay_imports=("delayed.dll",),
                exports=CORE_EXPORTS,
                rodata=CPU,
            ),
            "onnxruntime/capi/dep.dll": make_pe(imports=("kernel32.dll",)),
            "onnxruntime/capi/Delayed.dll": make_pe(imports=("api-ms-win-crt-heap-l1-1-0.dll",)),
            "onnxruntime/capi/bundled.dll": make_pe(imports=("kernel32.dll",)),
            "onnxruntime/capi/onnxruntime_pybind11_state.pyd": make_pe(imports=("python311.dll",)),
            "onnxruntime/LICENSE": LICENSE,
        }
    # 1.1.0: Delayed.dll is gone, newlib.dll is new and needs the VC++ runtime
    return {
        "onnxruntime/capi/onnxruntime.dll": make_pe(
            imports=("KERNEL32.dll", "dep.dll", "MSVCP140.dll", "bundled.dll", "newlib.dll"),
            payload=b"bigger" * 500,
            exports=CORE_EXPORTS,
            rodata=CPU,
        ),
        "onnxruntime/capi/dep.dll": make_pe(imports=("kernel32.dll",)),
        "onnxruntime/capi/newlib.dll": make_pe(imports=("VCRUNTIME140.dll",), payload=b"n" * 700),
        "onnxruntime/capi/bundled.dll": make_pe(imports=("kernel32.dll",)),
        "onnxruntime/capi/onnxruntime_pybind11_state.pyd": make_pe(imports=("python311.dll",)),
        "onnxruntime/LICENSE": LICENSE,
    }


def linux_members_110() -> dict[str, bytes]:
    """libonnxruntime_shared.so is gone, libnew.so is new, and the core now needs zlib."""
    old = linux_members()
    return {
        "onnxruntime/capi/libonnxruntime.so.1.1.0": make_elf(
            soname="libonnxruntime.so.1",
            needed=("libdep.so.2", "libnew.so", "libz.so.1", "libc.so.6", "libstdc++.so.6"),
            runpath="$ORIGIN",
            payload=b"core" * 3000,
            exports=CORE_EXPORTS,
            rodata=CPU,
        ),
        "onnxruntime/capi/libdep.so.2": old["onnxruntime/capi/libdep.so.2"],
        "onnxruntime/capi/libdep.so": old["onnxruntime/capi/libdep.so"],
        "onnxruntime/capi/libprovider.so": make_elf(needed=("libonnxruntime.so.1",)),
        "onnxruntime/capi/libnew.so": make_elf(
            soname="libnew.so", needed=("libc.so.6",), payload=b"new" * 500
        ),
        "onnxruntime/capi/libunused.so": old["onnxruntime/capi/libunused.so"],
        "onnxruntime/capi/onnxruntime_pybind11_state.so": old[
            "onnxruntime/capi/onnxruntime_pybind11_state.so"
        ],
        "onnxruntime/LICENSE": LICENSE,
        "onnxruntime/__init__.py": b"",
    }


def extra_members(version: str) -> dict[str, bytes]:
    return {
        "fake_extras/libs/extra.dll": make_pe(imports=("kernel32.dll",), payload=version.encode()),
        f"fake_extras-{version}.dist-info/licenses/LICENSE": b"Apache License 2.0\n",
    }


class YankingIndex(IndexServer):
    """The shared IndexServer plus PEP 592 yanking, which it does not model."""

    def __init__(self) -> None:
        super().__init__()
        self.yanked: set[str] = set()

    def _page(self, project: str, as_json: bool) -> tuple[bytes, str]:
        body, ctype = super()._page(project, as_json)
        if as_json:
            data = json.loads(body)
            for entry in data["files"]:
                if entry["filename"] in self.yanked:
                    entry["yanked"] = "broken build"
            return json.dumps(data).encode(), ctype
        text = body.decode()
        for name in self.yanked:
            anchor = f'">{html.escape(name)}</a>'
            text = text.replace(anchor, f'" data-yanked="">{html.escape(name)}</a>')
        return text.encode(), ctype


@dataclass
class Releases(FakeProject):
    """FakeProject pinned at 1.0.0 (plus fake-extras 2.0.0), with more releases published."""

    windows: dict[str, bytes] = field(default_factory=lambda: windows_members("1.0.0"))
    published: dict[str, Path] = field(default_factory=dict)

    def publish(self, project: str, filename: str, members: dict[str, bytes]) -> Path:
        version = filename.split("-")[1]
        path = make_wheel(self.root / "wheels" / filename, project, version, members)
        self.server.add(project, path)
        self.published[filename] = path
        return path

    def write(self) -> Releases:
        self.publish("fake-extras", EXTRA_OLD, extra_members("2.0.0"))
        super().write()  # the 1.0.0 wheels, product, policy and key
        (self.root / "licenses" / "bundled-LICENSE.txt").write_text("MIT License\n")
        return self

    def recipe_text(self) -> str:
        linux, windows = self.wheels["linux-x86_64"], self.wheels["windows-x86_64"]
        extra = self.published[EXTRA_OLD]
        return RECIPE.format(
            linux=linux.name,
            linux_sha=sha256_of(linux),
            linux_size=linux.stat().st_size,
            windows=windows.name,
            windows_sha=sha256_of(windows),
            extra=extra.name,
            extra_sha=sha256_of(extra),
            extra_size=extra.stat().st_size,
        )

    def publish_next(self) -> None:
        """1.1.0 and 2.1.0, and releases that the newest-version choice must pass over."""
        self.publish(PROJECT, LINUX_NEW, linux_members_110())
        for decoy in LINUX_DECOYS:
            self.publish(PROJECT, decoy, linux_members_110())
        self.publish(PROJECT, WINDOWS_NEW, windows_members("1.1.0"))
        self.publish("fake-extras", EXTRA_NEW, extra_members("2.1.0"))
        for version in ("1.2.0rc1", "1.3.0"):
            self.publish(PROJECT, LINUX_OLD.replace("1.0.0", version), linux_members_110())
            self.publish(PROJECT, WINDOWS_OLD.replace("1.0.0", version), windows_members("1.1.0"))
        self.server.yanked |= {  # type: ignore[attr-defined]
            LINUX_OLD.replace("1.0.0", "1.3.0"),
            WINDOWS_OLD.replace("1.0.0", "1.3.0"),
        }
        self.publish(PROJECT, LINUX_OLD.replace("1.0.0", "1.2.0"), linux_members_110())  # no win

    @property
    def recipe(self) -> Path:
        return self.root / "recipes" / "fake.toml"

    def pin_options(self, **overrides: object) -> PinOptions:
        values: dict[str, object] = {
            "index_url": self.server.url,
            "cache_dir": self.root / "cache",
            "retry": FAST_RETRY,
            "jobs": 2,
            "environ": self.environ,
        }
        values.update(overrides)
        return PinOptions(**values)  # type: ignore[arg-type]


@pytest.fixture
def releases(tmp_path: Path) -> Iterator[Releases]:
    with YankingIndex().running() as running:
        project = Releases(root=tmp_path / "project", server=running).write()
        project.publish_next()
        yield project


def only(targets: tuple[TargetBump, ...], name: str) -> TargetBump:
    return next(t for t in targets if t.target == name)


def names(changes: object) -> list[str]:
    return [c.name for c in changes]  # type: ignore[attr-defined]


def run_pin(releases: Releases, reporter: Reporter, **options: object) -> PinResult:
    return pin(releases.project, "fake", releases.pin_options(**options), reporter)


@pytest.mark.slow
def test_pin_moves_to_the_newest_release_and_reports_the_bump(
    releases: Releases, reporter: Reporter
) -> None:
    before = releases.recipe.read_text()
    result = run_pin(releases, reporter)

    assert result.written and not result.refused and result.exit_code == 0
    assert result.version == "1.1.0"
    linux_new, windows_new = releases.published[LINUX_NEW], releases.published[WINDOWS_NEW]
    # the recipe: exactly the pinned lines changed, every comment and blank line kept
    expected = (
        before.replace(LINUX_OLD, LINUX_NEW)
        .replace(WINDOWS_OLD, WINDOWS_NEW)
        .replace(sha256_of(releases.wheels["linux-x86_64"]), sha256_of(linux_new))
        .replace(
            f'sha256 = "{sha256_of(releases.wheels["windows-x86_64"])}"\n',
            f'sha256 = "{sha256_of(windows_new)}"\nsize = {windows_new.stat().st_size}\n',
        )
        .replace(
            f"size = {releases.wheels['linux-x86_64'].stat().st_size}\n",
            f"size = {linux_new.stat().st_size}\n",
        )
        .replace(
            'project = "onnxruntime-fake", version = "1.0.0"',
            'project = "onnxruntime-fake", version = "1.1.0"',
        )
        .replace('version = "1.0.0"\ndescription', 'version = "1.1.0"\ndescription')
        .replace("Fake runtime 1.0.0 with", "Fake runtime 1.1.0 with")
        .replace('"onnxruntime-fake"\nversion = "1.0.0"', '"onnxruntime-fake"\nversion = "1.1.0"')
        .replace("bundled with onnxruntime-fake 1.0.0", "bundled with onnxruntime-fake 1.1.0")
    )
    after = releases.recipe.read_text()
    assert after == expected
    assert after.replace("11.0.0", "").count("1.0.0") == 1  # the comment: pin never rewrites it
    assert 'version = "2.0.0"' in after and "(not 11.0.0)" in after  # others' versions stay
    assert any("line 1: a comment mentions 1.0.0" in n for n in result.notes)

    # the choice: tags kept where they exist, the closest manylinux otherwise, decoys passed over
    moves = {m.source: m for m in result.moves}
    assert moves["linux"].new_filename == LINUX_NEW
    assert moves["linux"].tags_note is not None
    assert "manylinux_2_31_x86_64; needs glibc 2.31, was 2.28" in moves["linux"].tags_note
    assert moves["windows"].new_filename == WINDOWS_NEW and moves["windows"].tags_note is None
    assert moves["windows"].size == windows_new.stat().st_size
    assert [(n.source, n.project) for n in result.not_moved] == [("extra", "fake-extras")]
    assert "invoke pin fake --source extra" in result.not_moved[0].reason
    assert set(result.notes) >= {
        "1.3.0 skipped: yanked",
        "1.2.0 skipped: no file for source windows",
        "1.2.0rc1 skipped: pre-release",
    }
    # the downloads went through the cache, so the next build needs no network
    cache = Cache(releases.root / "cache")
    assert cache.get(sha256_of(linux_new)) is not None
    assert cache.get(sha256_of(windows_new)) is not None

    # the bump report
    assert result.report is not None and result.report.ok
    (product,) = result.report.products
    assert product.product == "fakeproduct" and product.old_error is None
    linux = only(product.targets, "linux-x86_64")
    assert names(linux.added) == ["libnew.so", "libonnxruntime.so.1.1.0"]
    assert names(linux.removed) == ["libonnxruntime.so.1.0.0", "libonnxruntime_shared.so"]
    assert names(linux.changed) == ["libonnxruntime.so.1", "libprovider.so"]
    assert {c.directory for c in (*linux.added, *linux.removed)} == {"runtimes/fake"}
    old_members, new_members = linux_members(), linux_members_110()
    old_kept = (
        "libonnxruntime.so.1.0.0",
        "libdep.so.2",
        "libprovider.so",
        "libonnxruntime_shared.so",
    )
    new_kept = ("libonnxruntime.so.1.1.0", "libdep.so.2", "libprovider.so", "libnew.so")
    assert linux.old_size == sum(len(old_members[f"onnxruntime/capi/{n}"]) for n in old_kept)
    assert linux.new_size == sum(len(new_members[f"onnxruntime/capi/{n}"]) for n in new_kept)
    assert linux.externals_added == ("runtimes/fake: libz.so.1 (zlib, system)",)
    assert linux.externals_removed == ()
    assert [(c.component, c.old, c.new) for c in linux.licences] == [
        ("onnxruntime-fake", "1.0.0 (MIT)", "1.1.0 (MIT)")
    ]
    windows = only(product.targets, "windows-x86_64")
    assert names(windows.added) == ["newlib.dll"]
    assert names(windows.removed) == ["Delayed.dll"]
    assert names(windows.changed) == ["onnxruntime.dll"]
    assert windows.externals_added == ("runtimes/fake: VCRUNTIME140.dll (msvc-runtime, redist)",)
    assert windows.externals_removed == (
        "runtimes/fake: api-ms-win-crt-heap-l1-1-0.dll (windows, system)",
    )
    assert [(c.component, c.old, c.new) for c in windows.licences] == [
        (
            "bundled-thing",
            "bundled with onnxruntime-fake 1.0.0 (MIT)",
            "bundled with onnxruntime-fake 1.1.0 (MIT)",
        ),
        ("onnxruntime-fake", "1.0.0 (MIT)", "1.1.0 (MIT)"),
    ]
    text = "\n".join(result.lines())
    assert "+ runtimes/fake/libnew.so" in text and "- runtimes/fake/Delayed.dll" in text
    assert f"{linux.size_delta:+,} B" in text and " MiB)" in text
    assert "external + runtimes/fake: libz.so.1" in text
    assert "fake.toml rewritten" in text
    data = json.loads(result.to_json())
    assert data["written"] is True and data["report"]["products"][0]["product"] == "fakeproduct"

    again = run_pin(releases, reporter)
    assert not again.moves and not again.written and again.exit_code == 0
    assert releases.recipe.read_text() == after


@pytest.mark.slow
def test_pin_by_source_moves_only_that_project(releases: Releases, reporter: Reporter) -> None:
    before = releases.recipe.read_text()
    result = run_pin(releases, reporter, sources=("extra",))
    assert result.written and result.version == "2.1.0"
    extra_new = releases.published[EXTRA_NEW]
    assert {(e.field, e.old, e.new) for e in result.edits} == {
        ("sources.extra.pypi.version", "2.0.0", "2.1.0"),
        ("sources.extra.pypi.filename", EXTRA_OLD, EXTRA_NEW),
        ("sources.extra.sha256", sha256_of(releases.published[EXTRA_OLD]), sha256_of(extra_new)),
        (
            "sources.extra.size",
            str(releases.published[EXTRA_OLD].stat().st_size),
            str(extra_new.stat().st_size),
        ),
        (
            "component.description",
            "Fake runtime 1.0.0 with fake-extras 2.0.0 (not 11.0.0)",
            "Fake runtime 1.0.0 with fake-extras 2.1.0 (not 11.0.0)",
        ),
        ("targets.windows-x86_64.licenses[1].version", "2.0.0", "2.1.0"),
        (
            "targets.windows-x86_64.licenses[1].purl",
            "pkg:pypi/fake-extras@2.0.0",
            "pkg:pypi/fake-extras@2.1.0",
        ),
        (
            "targets.windows-x86_64.licenses[1].texts[0].member",
            "fake_extras-2.0.0.dist-info/licenses/LICENSE",
            "fake_extras-2.1.0.dist-info/licenses/LICENSE",
        ),
    }
    after = releases.recipe.read_text()
    changed = [
        (a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b
    ]
    assert len(changed) == 7  # the edits above, one line each (the pypi table holds two)
    assert 'version = "1.0.0"\ndescription' in after  # the component's own version stays
    assert {n.source for n in result.not_moved} == {"linux", "windows"}
    assert result.report is not None and result.report.ok
    windows = only(result.report.products[0].targets, "windows-x86_64")
    assert names(windows.changed) == ["extra.dll"] and not windows.added and not windows.removed
    assert [(c.component, c.new) for c in windows.licences] == [
        ("fake-extras", "2.1.0 (Apache-2.0)")
    ]


def test_check_reports_stale_pins_then_passes_after_pinning(
    releases: Releases, reporter: Reporter
) -> None:
    before = releases.recipe.read_bytes()
    report = check_pins(releases.project, (), releases.pin_options())
    assert releases.recipe.read_bytes() == before  # check changes nothing
    states = {s.source: (s.state, s.newest) for s in report.statuses}
    assert states == {
        "linux": ("stale", "1.1.0"),
        "windows": ("unpinned", "1.1.0"),  # no size, and stale
        "extra": ("stale", "2.1.0"),
    }
    assert not report.ok and report.exit_code == 2
    linux = next(s for s in report.statuses if s.source == "linux")
    assert "1.2.0 skipped: no file for source windows" in linux.details  # why not 1.2.0
    commands = {s.source: s.command for s in report.statuses}
    assert commands == {
        "linux": "invoke pin fake",
        "windows": "invoke pin fake",
        "extra": "invoke pin fake --source extra",
    }
    assert "3 pins checked, 3 need attention" in report.lines()

    run_pin(releases, reporter, build=False)
    run_pin(releases, reporter, build=False, sources=("extra",))
    clean = check_pins(releases.project, ("fake",), releases.pin_options())
    assert clean.ok and clean.exit_code == 0, clean.lines()
    assert json.loads(clean.to_json())["ok"] is True


def test_check_names_a_vanished_file_and_a_changed_digest(releases: Releases) -> None:
    del releases.server.files[WINDOWS_OLD]
    report = check_pins(releases.project, ("fake",), releases.pin_options())
    assert {s.source: s.state for s in report.statuses}["windows"] == "gone"
    assert report.exit_code == FetchError.exit_code
    releases.server.faults.publish_sha256 = "f" * 64
    report = check_pins(releases.project, ("fake",), releases.pin_options())
    assert {s.source: s.state for s in report.statuses}["linux"] == "mismatch"
    assert report.exit_code == IntegrityError.exit_code


def test_wrong_published_digest_is_refused_and_the_recipe_untouched(
    releases: Releases, reporter: Reporter
) -> None:
    before = releases.recipe.read_bytes()
    releases.server.faults.publish_sha256 = "e" * 64
    with pytest.raises(IntegrityError) as err:
        run_pin(releases, reporter)
    assert "does not match the pin" in str(err.value)
    assert releases.recipe.read_bytes() == before
    assert Cache(releases.root / "cache").get("e" * 64) is None
    assert not list(releases.recipe.parent.glob(".*")), "no temporary recipe left behind"


def test_an_unpublished_digest_is_not_trusted(releases: Releases, reporter: Reporter) -> None:
    before = releases.recipe.read_bytes()
    releases.server.faults.publish_digest = False
    with pytest.raises(IntegrityError, match="publishes no sha256"):
        run_pin(releases, reporter)
    assert releases.recipe.read_bytes() == before


def test_a_version_without_a_matching_wheel_is_a_clear_error(
    releases: Releases, reporter: Reporter
) -> None:
    before = releases.recipe.read_bytes()
    with pytest.raises(FetchError) as err:
        run_pin(releases, reporter, version="1.2.0")
    message = str(err.value)
    assert "source windows" in message and "onnxruntime-fake 1.2.0" in message
    assert "onnxruntime_fake-1.2.0-cp311-cp311-manylinux_2_28_x86_64.whl" in message
    with pytest.raises(FetchError, match=r"versions listed: .*1\.1\.0"):
        run_pin(releases, reporter, version="9.9.9")
    assert releases.recipe.read_bytes() == before


@pytest.mark.parametrize("html_only", [False, True], ids=["pep691-json", "pep503-html"])
def test_newest_skips_prereleases_and_yanked_files(
    releases: Releases, reporter: Reporter, html_only: bool
) -> None:
    releases.server.faults.html_only = html_only
    result = run_pin(releases, reporter, build=False)
    assert result.version == "1.1.0" and result.written and result.report is None
    assert "1.3.0 skipped: yanked" in result.notes
    assert "1.2.0rc1 skipped: pre-release" in result.notes
    # named explicitly, a yanked release is still pinnable (PEP 592), and says so
    yanked = run_pin(releases, reporter, build=False, version="1.3.0")
    assert yanked.version == "1.3.0"
    assert any("is yanked" in n for n in yanked.notes)


@pytest.mark.slow
def test_a_release_that_does_not_build_is_not_pinned_without_force(
    releases: Releases, reporter: Reporter
) -> None:
    broken = linux_members_110()
    broken["onnxruntime/capi/libnew.so"] = make_elf(soname="libnew.so", needed=("libgone.so.3",))
    releases.publish(PROJECT, LINUX_OLD.replace("1.0.0", "1.4.0"), broken)
    releases.publish(PROJECT, WINDOWS_OLD.replace("1.0.0", "1.4.0"), windows_members("1.1.0"))
    before = releases.recipe.read_bytes()
    result = run_pin(releases, reporter, version="1.4.0")
    assert result.refused and not result.written and result.exit_code == 8  # ClosureError
    assert result.report is not None
    assert "libgone.so.3" in (result.report.products[0].new_error or "")
    assert any("NOT rewritten" in line for line in result.lines())
    assert releases.recipe.read_bytes() == before
    forced = run_pin(releases, reporter, version="1.4.0", force=True)
    assert forced.written and forced.exit_code == 0
    assert 'version = "1.4.0"' in releases.recipe.read_text()


def test_rewrite_follows_the_rules_on_the_real_recipes() -> None:
    """No network: the repository's own recipes, moved by hand-made SourceMoves."""
    text = (REPO / "recipes" / "openvino.toml").read_text()

    def move(source: str, project: str, old: str, new: str, filename: str) -> SourceMove:
        new_name = filename.replace(old, new)
        return SourceMove(source, project, old, filename, new, new_name, "a" * 64, 1, None)

    ort = [
        move(
            "ort-linux",
            "onnxruntime-openvino",
            "1.24.1",
            "1.25.0",
            "onnxruntime_openvino-1.24.1-cp311-cp311-manylinux_2_28_x86_64.whl",
        ),
        move(
            "ort-windows",
            "onnxruntime-openvino",
            "1.24.1",
            "1.25.0",
            "onnxruntime_openvino-1.24.1-cp311-cp311-win_amd64.whl",
        ),
    ]
    new, edits, notes = rewrite_recipe(text, ort, "onnxruntime-openvino", True)
    fields = {e.field: e.new for e in edits}
    assert fields["component.version"] == "1.25.0"
    assert fields["component.description"] == (
        "ONNX Runtime 1.25.0 with the OpenVINO 2025.4.1 execution provider (Intel GPU)"
    )
    assert fields["targets.linux-x86_64.licenses[0].version"] == "1.25.0"
    assert fields["targets.windows-x86_64.licenses[0].version"] == "1.25.0"
    assert not any(".licenses[1]" in f or ".licenses[2]" in f for f in fields)  # OpenVINO, oneTBB
    assert new.count("2025.4.1") == text.count("2025.4.1")
    assert any("ORT 1.24.1 with OpenVINO" in n for n in notes)  # the comment is left to a person

    openvino = [
        move(
            "openvino-windows",
            "openvino",
            "2025.4.1",
            "2025.5.0",
            "openvino-2025.4.1-20426-cp311-cp311-win_amd64.whl",
        ),
    ]
    new, edits, notes = rewrite_recipe(text, openvino, "onnxruntime-openvino", True)
    fields = {e.field: e.new for e in edits}
    assert "component.version" not in fields
    assert fields["component.description"] == (
        "ONNX Runtime 1.24.1 with the OpenVINO 2025.5.0 execution provider (Intel GPU)"
    )
    for target in ("linux-x86_64", "windows-x86_64"):
        assert fields[f"targets.{target}.licenses[1].version"] == "2025.5.0"
        assert fields[f"targets.{target}.licenses[1].purl"] == "pkg:pypi/openvino@2025.5.0"
        for rule in (1, 2):  # the oneTBB texts come from the OpenVINO wheel's dist-info too
            assert fields[f"targets.{target}.licenses[{rule}].texts[0].member"].startswith(
                "openvino-2025.5.0.dist-info/"
            )
    assert 'version = "2021.2.6"' in new  # oneTBB's own version is not OpenVINO's
    assert any("bundled with OpenVINO 2025.4.1" in n for n in notes)

    webgpu = (REPO / "recipes" / "webgpu.toml").read_text()
    moves = [
        move(
            "ort-linux",
            "onnxruntime-webgpu",
            "1.27.0",
            "1.28.0",
            "onnxruntime_webgpu-1.27.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
        ),
        move(
            "ort-windows",
            "onnxruntime-webgpu",
            "1.27.0",
            "1.28.0",
            "onnxruntime_webgpu-1.27.0-cp311-cp311-win_amd64.whl",
        ),
    ]
    new, edits, _ = rewrite_recipe(webgpu, moves, "onnxruntime-webgpu", True)
    assert "1.27.0" not in new
    assert new.count('version = "bundled with onnxruntime-webgpu 1.28.0"') == 2
    old_lines, new_lines = webgpu.splitlines(), new.splitlines()
    assert len(old_lines) == len(new_lines)
    differing = [b for a, b in zip(old_lines, new_lines, strict=True) if a != b]
    # version, description, twice (pypi, sha256, size), 2 ORT rules, the dxc and dxil rules
    assert len(differing) == 12
    assert all("1.28.0" in line or "a" * 64 in line or line == "size = 1" for line in differing)


def test_a_held_source_is_reported_but_not_stale(releases: Releases) -> None:
    text = releases.recipe.read_text()
    marker = '[sources.extra]\npypi = { project = "fake-extras"'
    assert marker in text
    held = text.replace(
        "[sources.extra]\n", '[sources.extra]\nhold = "must match what fake 1.0.0 was built with"\n'
    )
    releases.recipe.write_text(held)
    report = check_pins(releases.project, ("fake",), releases.pin_options())
    extra = next(s for s in report.statuses if s.source == "extra")
    assert extra.state == "held"
    assert "2.1.0 is out; held: must match what fake 1.0.0 was built with" in extra.details
    assert {s.state for s in report.statuses if s.source != "extra"} != {"held"}


WATCHED_WAIVERS = """
[[waivers]]
file = "runtimes/fake/Delayed.dll"
license = "MIT"
targets = ["windows-x86_64"]
reason = "terms requested from the vendor"
reviewer = "A. Auditor"

[[waivers]]
file = "runtimes/fake/dep.dll"
license = "MIT"
targets = ["windows-x86_64"]
reason = "terms requested from the vendor"
reviewer = "A. Auditor"
"""


def test_check_says_when_a_newer_release_no_longer_ships_a_waived_file(
    tmp_path: Path,
) -> None:
    """1.1.0's Windows wheel has no Delayed.dll (its waiver could go) but still dep.dll (its
    waiver stays); the newer wheel's member list is read by Range requests, not downloaded."""
    with YankingIndex().running() as running:
        releases = Releases(root=tmp_path / "project", server=running)
        releases.product_extra = WATCHED_WAIVERS
        releases.write()
        releases.publish_next()
        report = check_pins(releases.project, ("fake",), releases.pin_options())
        new_windows = next(n for n in running.requests if WINDOWS_NEW in n[1])
    assert [(w.waiver.file, w.version) for w in report.waivers] == [
        ("runtimes/fake/Delayed.dll", "1.1.0")
    ]
    assert (
        "waiver: fake 1.1.0 no longer ships runtimes/fake/Delayed.dll (MIT): after moving to "
        "it, the waiver for runtimes/fake/Delayed.dll can be removed"
    ) in report.lines()
    assert json.loads(report.to_json())["obsolete_waivers"][0]["file"] == (
        "runtimes/fake/Delayed.dll"
    )
    assert new_windows[2] is not None and new_windows[2].startswith("bytes="), new_windows
    # nothing of the newer wheel was downloaded whole: every request for it was a range
    assert all(r[2] for r in running.requests if WINDOWS_NEW in r[1])


def test_a_member_list_is_read_by_ranges_and_a_server_without_ranges_is_refused(
    tmp_path: Path,
) -> None:
    from ortbundle.fetch.http import new_session
    from ortbundle.fetch.remote_zip import remote_member_names

    wheel = make_wheel(
        tmp_path / WINDOWS_NEW, "onnxruntime-fake", "1.1.0", windows_members("1.1.0")
    )
    with IndexServer().running() as server:
        server.add("onnxruntime-fake", wheel)
        url = server.url.replace("/simple/", f"/files/{wheel.name}")
        with new_session(None) as session:
            names = remote_member_names(session, url, FAST_RETRY, what=wheel.name)
            assert "onnxruntime/capi/newlib.dll" in names
            assert all(r[2] for r in server.requests if wheel.name in r[1])  # ranges only
            server.faults.ignore_range = True
            with pytest.raises(FetchError, match="does not serve byte ranges"):
                remote_member_names(session, url, FAST_RETRY, what=wheel.name)
