"""report.html: written with every build, self-contained, escaped, and true to the build.

The picture is checked without a golden file: every treemap's leaf areas are each file's share
of its package's bytes, and the overview bars are the packages' sizes on one scale. The page is
rendered by headless Chromium (marker `chromium`): a screenshot that is not blank, and the DOM
it builds (every package, component, audit row and closure present; no injected markup).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle._core.progress import Reporter
from ortbundle.config.plan import Project
from ortbundle.evidence.record import hash_file
from ortbundle.evidence.report.treemap import Node, group, layout, squarify
from ortbundle.evidence.signing import load_secret_key, sign
from ortbundle.evidence.verify import verify_tree
from ortbundle.pipeline.build import build
from ortbundle.pipeline.result import BuildResult
from tests.helpers.faults import set_roots
from tests.helpers.png import distinct_colours
from tests.helpers.project import FakeProject
from tests.test_waivers import SECRET, _with_unlicensed_dll

# A kept library whose name is markup, and a waiver reason that is a script: both must come out
# as text. (No '/': a file name is one path component.)
HOSTILE_LIB = "lib\"'><img src=x onerror=alert(1)>&amp;<svg onload=alert(2)>.so"
HOSTILE_REASON = "</p><script>alert('reason')</script><b>bold</b>"


def write_reported(fake: FakeProject) -> FakeProject:
    """The synthetic product with a waived DLL (tests/test_waivers.py's) and a hostile library
    name kept as a root."""
    fake.linux[f"onnxruntime/capi/{HOSTILE_LIB}"] = _hostile_elf()
    _with_unlicensed_dll(
        fake,
        '\n[[waivers]]\nfile = "runtimes/fake/secret.dll"\nlicense = "LicenseRef-Secret"\n'
        f'targets = ["windows-x86_64"]\nreason = {json.dumps(HOSTILE_REASON)}\n'
        'reviewer = "Jane Reviewer"\n',
    )
    set_roots(fake, "linux-x86_64", [*fake.linux_roots, 'lib"*'])
    return fake


def _hostile_elf() -> bytes:
    from tests.helpers.elf import make_elf

    return make_elf(soname="libhostile.so", payload=b"hostile" * 300)


@pytest.fixture
def reported(fake: FakeProject, reporter: Reporter) -> BuildResult:
    return build(write_reported(fake).project, fake.options(), reporter)


class _Elements(HTMLParser):
    """Every start tag with its attributes, and the page's text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def elements(html: str) -> _Elements:
    parser = _Elements()
    parser.feed(html)
    return parser


def stage_bytes(version_dir: Path, target: str) -> int:
    """The regular files under a target's stage, from the manifest (links not counted)."""
    manifest = json.loads((version_dir / "manifest.json").read_text())
    return sum(
        o["size"]
        for o in manifest["outputs"]
        if o["path"].startswith(f"{target}/") and "link_to" not in o
    )


# --- the layout ------------------------------------------------------------------------------


def test_squarify_tiles_the_rectangle_in_proportion() -> None:
    sizes = [500, 433, 300, 120, 64, 64, 30, 7, 1]
    rects = squarify(sizes, (10.0, 20.0, 600.0, 400.0))
    total = sum(sizes)
    for size, (x, y, w, h) in zip(sizes, rects, strict=True):
        assert w * h == pytest.approx(size / total * 600 * 400)
        assert x >= 10 - 1e-9 and x + w <= 610 + 1e-9 and y >= 20 - 1e-9 and y + h <= 420 + 1e-9
    for i, a in enumerate(rects):  # no two overlap
        for b in rects[i + 1 :]:
            overlap_w = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
            overlap_h = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
            assert overlap_w <= 1e-6 or overlap_h <= 1e-6
    # squarified, not slices: no sliver thinner than 1:12 for these sizes
    assert max(max(w / h, h / w) for _, _, w, h in rects) < 12


def test_nested_layout_gives_each_file_its_share() -> None:
    files = [Node(f"f{i}", size, "file") for i, size in enumerate([9, 7, 5, 3, 1, 0])]
    root = group(
        "p", "package", [group("a", "runtime", files[:3]), group("b", "runtime", files[3:])]
    )
    placed = dict((n.label, r) for n, r in layout(root, (0.0, 0.0, 100.0, 50.0)))
    assert "f5" not in placed  # zero bytes take no room
    for node in files[:5]:
        _, _, w, h = placed[node.label]
        assert w * h == pytest.approx(node.size / 25 * 5000)
    ax, ay, aw, ah = placed["a"]
    for name in ("f0", "f1", "f2"):  # a group's files lie inside it
        x, y, w, h = placed[name]
        assert ax - 1e-9 <= x and x + w <= ax + aw + 1e-9 and ay - 1e-9 <= y <= ay + ah


# --- the page a build writes -----------------------------------------------------------------


def test_every_build_writes_a_self_contained_report_listed_in_the_manifest(
    reported: BuildResult,
) -> None:
    path = reported.version_dir / "report.html"
    html = path.read_text("utf-8")
    manifest = json.loads((reported.version_dir / "manifest.json").read_text())
    listed = {o["path"] for o in manifest["outputs"]}
    assert {"report.html", "closures/linux-x86_64.json", "closures/windows-x86_64.json"} <= listed
    assert verify_tree(reported.version_dir, ignore_signature=True).ok
    page = elements(html)
    # self-contained: no script, no external resource, nothing fetched
    assert not [t for t, _ in page.tags if t in ("script", "link", "img", "iframe", "object")]
    assert not [
        a for _, a in page.tags for k in ("src", "href") if a.get(k, "#").startswith("http")
    ]
    assert "url(" not in html and "@import" not in html


@pytest.mark.slow
def test_the_report_is_deterministic(fake: FakeProject, reporter: Reporter, tmp_path: Path) -> None:
    write_reported(fake)
    one = build(Project.at(fake.root, tmp_path / "one"), fake.options(), reporter)
    two = build(
        Project.at(fake.root, tmp_path / "two"),
        fake.options(cache_dir=tmp_path / "cache2"),  # pruned afresh: no memo shared
        reporter,
    )
    assert (one.version_dir / "report.html").read_bytes() == (
        two.version_dir / "report.html"
    ).read_bytes()


def test_hostile_names_and_reasons_are_text_not_markup(reported: BuildResult) -> None:
    html = (reported.version_dir / "report.html").read_text("utf-8")
    page = elements(html)
    tags = [t for t, _ in page.tags]
    assert "img" not in tags and "script" not in tags and "b" not in tags
    assert not [a for _, a in page.tags if "onerror" in a or "onload" in a]
    text = "".join(page.text)
    assert HOSTILE_LIB in text  # shown, literally (in the closure table and the tooltips)
    assert HOSTILE_REASON in text  # the waiver's reason, literally
    assert "&lt;svg onload=alert(2)&gt;" in html and "&amp;amp;" in html


def test_the_treemap_areas_are_the_package_sizes(reported: BuildResult) -> None:
    """Golden-free: per picture, each leaf's area is its file's share of the bytes its packages
    carry, the leaves fill the map, and the overview bars are every package's bytes on one
    scale."""
    html = (reported.version_dir / "report.html").read_text("utf-8")
    page = elements(html)
    carried = {
        # the channels of the synthetic product, and the target each carries
        "arch": "linux-x86_64",
        "flatpak": "linux-x86_64",
        "deb": "linux-x86_64",
        "rpm": "linux-x86_64",
        "nsis": "windows-x86_64",
    }
    maps: dict[str, tuple[float, float, int]] = {}
    leaves: dict[str, list[tuple[float, int, dict[str, str]]]] = {}
    bars: dict[str, float] = {}
    current = ""
    for tag, attrs in page.tags:
        if tag == "svg" and "treemap" in attrs.get("class", ""):
            current = attrs["data-packages"]
            maps[current] = (
                float(attrs["width"]),
                float(attrs["height"]),
                int(attrs["data-bytes"]),
            )
        elif tag == "rect" and attrs.get("class") == "leaf":
            area = float(attrs["width"]) * float(attrs["height"])
            leaves.setdefault(current, []).append((area, int(attrs["data-bytes"]), attrs))
        elif tag == "rect" and attrs.get("class") == "bar":
            package = attrs["data-package"]
            bars[package] = bars.get(package, 0.0) + float(attrs["width"])
    # the four Linux packages carry the same stage: one picture for them
    assert set(maps) == {"arch flatpak deb rpm", "nsis"}
    assert set(bars) == set(carried)
    for names, (width, height, size) in maps.items():
        for package in names.split():
            assert size == stage_bytes(reported.version_dir, carried[package])  # what it carries
            assert bars[package] / size == pytest.approx(bars["nsis"] / maps["nsis"][2], rel=1e-4)
        areas = leaves[names]
        assert sum(b for _, b, _ in areas) == size
        assert sum(a for a, _, _ in areas) == pytest.approx(width * height, rel=1e-4)
        for area, nbytes, _ in areas:
            assert area == pytest.approx(nbytes / size * width * height, rel=1e-3, abs=0.01)
    # per component, the areas add up to the component's bytes
    width, height, size = maps["nsis"]
    secret = sum(a for a, _, at in leaves["nsis"] if at["data-component"] == "secret")
    assert secret == pytest.approx(len(SECRET) / size * width * height, rel=1e-3)


def test_the_closure_of_every_runtime_is_shown(reported: BuildResult) -> None:
    page = elements((reported.version_dir / "report.html").read_text("utf-8"))
    closures = [a for t, a in page.tags if t == "div" and a.get("class") == "closure"]
    shown = {(a["data-target"], a["data-runtime"]) for a in closures}
    assert shown == {(t.target, s.runtime) for t in reported.targets for s in t.runtimes}
    text = "".join(page.text)
    for target in reported.targets:
        for staged in target.runtimes:
            for kept in staged.closure.kept:
                assert kept.name in text
            for dropped in staged.closure.dropped:
                assert f"{dropped.source}:{dropped.member}" in text and dropped.reason in text
            for ext in staged.closure.externals:
                assert ext.name in text
    groups = {a["data-group"] for t, a in page.tags if t == "tr" and "data-group" in a}
    assert {"glibc", "msvc-runtime"} <= groups


@pytest.mark.slow
def test_waivers_are_highlighted_in_the_audit(reported: BuildResult) -> None:
    page = elements((reported.version_dir / "report.html").read_text("utf-8"))
    rows = [
        (a["class"], a["data-component"])
        for t, a in page.tags
        if t == "tr" and "data-component" in a
    ]
    assert ("waived", "secret") in rows
    audits = [a["data-channels"] for t, a in page.tags if t == "div" and a.get("class") == "audit"]
    # arch, flatpak, deb and rpm audit the same target with the same rows: shown once
    assert any(set(c.split()) == {"arch", "flatpak", "deb", "rpm"} for c in audits)
    assert any("nsis" in c.split() for c in audits)


# --- what changed ----------------------------------------------------------------------------


def _earlier_from(version_dir: Path, into: Path, version: str, key: Path) -> Path:
    """A synthetic earlier build: this one's evidence with a file gone, one resized, a licence
    changed and one more external library — as a build of `version` would have written it,
    signed with `key` (the product's) as that build would have signed it."""
    earlier = into / version
    shutil.copytree(version_dir, earlier, symlinks=True)
    record = earlier / "closures" / "linux-x86_64.json"
    closures = json.loads(record.read_text())
    closures["runtimes"][0]["externals"].append(
        {"name": "libz.so.1", "group": "zlib", "kind": "system", "note": "", "needed_by": []}
    )
    record.write_text(json.dumps(closures))
    manifest = json.loads((earlier / "manifest.json").read_text())
    manifest_version = manifest["product"]["version"]
    manifest["product"]["version"] = version
    outputs = []
    for o in manifest["outputs"]:
        if o["path"] == "linux-x86_64/runtimes/fake/libdep.so.2":
            o["size"] -= 100
        if o["path"].startswith("windows-x86_64/runtimes/fake/secret.dll"):
            continue  # the earlier build did not ship it
        if o.get("component") == "fake":
            o["license"] = "BSD-3-Clause"
        if o["path"].startswith("packaging/"):  # package names carry their version
            o["path"] = o["path"].replace(manifest_version, version)
        if o["path"] == "closures/linux-x86_64.json":
            o["size"], o["sha256"] = hash_file(record)
        outputs.append(o)
    manifest["outputs"] = outputs
    data = json.dumps(manifest).encode()
    (earlier / "manifest.json").write_bytes(data)
    signature = sign(data, load_secret_key(key), trusted_comment=f"fakeproduct {version}")
    (earlier / "manifest.json.minisig").write_text(signature)
    return earlier


def _changes_text(version_dir: Path) -> str:
    html = (version_dir / "report.html").read_text("utf-8")
    return html[html.index('<section id="changes">') :]


@pytest.mark.slow
def test_an_earlier_version_in_dist_is_compared(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    write_reported(fake)
    first = build(Project.at(fake.root, tmp_path / "a"), fake.options(), reporter)
    assert "No earlier build" in _changes_text(first.version_dir)
    dist = tmp_path / "b"
    _earlier_from(first.version_dir, dist / "fakeproduct", "1.2.2", fake.secret_key)
    _earlier_from(first.version_dir, dist / "fakeproduct", "1.3.0", fake.secret_key)  # newer
    second = build(Project.at(fake.root, dist), fake.options(), reporter)
    changes = _changes_text(second.version_dir)
    assert "fakeproduct 1.2.2" in changes and "dist/fakeproduct/1.2.2" in changes
    page = elements(changes)
    rows = [a.get("class") for t, a in page.tags if t == "tr"]
    text = "".join(page.text)
    assert "windows-x86_64/runtimes/fake/secret.dll" in text and "added" in rows
    assert "linux-x86_64/runtimes/fake/libdep.so.2" in text and "changed" in rows
    assert "BSD-3-Clause" in text  # the licence before
    assert "libz.so.1 (zlib)" in text  # no longer needed
    # the package file names carry the version: compared as {version}, so not added/removed
    assert not [r for r in rows if r == "removed"]
    assert "+100" in text and f"+{len(SECRET):,}" in text


@pytest.mark.slow
def test_compare_with_a_given_build(fake: FakeProject, reporter: Reporter, tmp_path: Path) -> None:
    write_reported(fake)
    first = build(Project.at(fake.root, tmp_path / "a"), fake.options(), reporter)
    earlier = _earlier_from(first.version_dir, tmp_path / "elsewhere", "0.9", fake.secret_key)
    result = build(Project.at(fake.root, tmp_path / "c"), fake.options(compare=earlier), reporter)
    changes = _changes_text(result.version_dir)
    assert "fakeproduct 0.9" in changes and "--compare 0.9" in changes
    assert str(tmp_path) not in (result.version_dir / "report.html").read_text()  # no host path


def test_a_bad_compare_path_fails_before_the_build(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    write_reported(fake)
    dist = tmp_path / "d"
    with pytest.raises(ConfigError) as failed:
        build(Project.at(fake.root, dist), fake.options(compare=tmp_path / "nothing"), reporter)
    assert failed.value.exit_code == 2 and "--compare" in str(failed.value)
    assert not (dist / "fakeproduct").exists()


# --- rendered by a browser -------------------------------------------------------------------


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium not installed (Debian: apt-get install chromium)")
    return found


def _browse(page: Path, profile: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            *flags,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


@pytest.fixture
def dom(reported: BuildResult, tmp_path: Path) -> Iterator[_Elements]:
    done = _browse(reported.version_dir / "report.html", tmp_path / "profile", "--dump-dom")
    yield elements(done.stdout)


@pytest.mark.chromium
def test_chromium_renders_a_picture(reported: BuildResult, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    _browse(
        reported.version_dir / "report.html",
        tmp_path / "profile",
        f"--screenshot={shot}",
        "--window-size=1100,700",
    )
    assert shot.is_file() and shot.stat().st_size > 1000
    # bars and treemaps: areas of several hues and shades; a blank or a text-only page has only
    # greys and a link's anti-aliased blue (no saturated colour covers 1000 pixels)
    assert distinct_colours(shot, saturation=40, min_pixels=1000) >= 3


@pytest.mark.chromium
def test_chromium_dom_has_every_package_component_and_closure(
    reported: BuildResult, dom: _Elements
) -> None:
    figures = {a["data-packages"] for t, a in dom.tags if t == "figure"}
    assert figures == {"arch flatpak deb rpm", "nsis"}
    treemaps = [a for t, a in dom.tags if t == "svg" and "treemap" in a.get("class", "")]
    assert len(treemaps) == len(figures)
    bars = {a["data-package"] for t, a in dom.tags if t == "rect" and a.get("class") == "bar"}
    assert bars == {"arch", "flatpak", "deb", "rpm", "nsis"}
    components = {c.name for t in reported.targets for c in t.licensing.components}
    audited = {a["data-component"] for t, a in dom.tags if t == "tr" and "data-component" in a}
    assert components == audited == {"fake", "ortbundle", "secret"}
    leaves = {a["data-component"] for t, a in dom.tags if t == "rect" and a.get("class") == "leaf"}
    assert leaves == components
    closures = {
        (a["data-target"], a["data-runtime"])
        for t, a in dom.tags
        if t == "div" and a.get("class") == "closure"
    }
    assert closures == {("linux-x86_64", "fake"), ("windows-x86_64", "fake")}
    # the browser built no element from the hostile strings
    tags = [t for t, _ in dom.tags]
    assert "img" not in tags and "script" not in tags
    assert HOSTILE_LIB in "".join(dom.text) and HOSTILE_REASON in "".join(dom.text)


def test_requirements_say_required_or_optional_and_how_to_install(tmp_path: Path) -> None:
    """CONTRACT §1 fields in a closure record reach the page: required/optional per group, the
    install sentence, a run-time load, a host-only stack."""
    from ortbundle.evidence.report.closures import CLOSURES_SCHEMA
    from ortbundle.evidence.report.collect import closures
    from ortbundle.evidence.report.render import render_html
    from ortbundle.evidence.report.views import Report

    def external(name: str, group: str, **more: object) -> dict[str, object]:
        return {
            "name": name,
            "group": group,
            "kind": "driver",
            "note": "",
            "needed_by": ["x"],
            **more,
        }

    record = {
        "schema": CLOSURES_SCHEMA,
        "target": "linux-x86_64",
        "runtimes": [
            {
                "runtime": "cuda",
                "directory": "runtimes/cuda",
                "entry": "libonnxruntime.so.1",
                "outside_globs": 0,
                "kept": [],
                "links": [],
                "dropped": [],
                "externals": [
                    external("libOpenCL.so.1", "opencl", optional=True),
                    external(
                        "libcudnn.so.9",
                        "cudnn",
                        optional=False,
                        via="loads",
                        install="Install NVIDIA cuDNN 9 for CUDA 13",
                        sandbox=False,
                    ),
                ],
            }
        ],
    }
    (tmp_path / "closures").mkdir()
    (tmp_path / "closures" / "linux-x86_64.json").write_text(json.dumps(record))
    views = closures(tmp_path, ["linux-x86_64"])
    html = render_html(Report("p", "1", "", None, ("linux-x86_64",), (), (), views, (), None, 0.0))
    page = elements(html)
    text = "".join(page.text)
    badges = [a["class"] for t, a in page.tags if t == "span" and "badge" in a.get("class", "")]
    assert badges == ["badge required", "badge optional"]  # cudnn, then opencl (by group)
    assert "Install NVIDIA cuDNN 9 for CUDA 13" in text and "(loaded by name)" in text
    assert "not in a Flatpak sandbox" in text


def test_models_and_their_gates_are_shown(fake: FakeProject, reporter: Reporter) -> None:
    from tests.helpers.onnx_models import detector
    from tests.test_models import with_model

    with_model(fake, detector(opset=17))
    result = build(fake.project, fake.options(), reporter)
    html = (result.version_dir / "report.html").read_text("utf-8")
    section = html[html.index('<section id="models">') : html.index('<section id="changes">')]
    page = elements(section)
    assert [a["data-model"] for t, a in page.tags if t == "div"] == ["yolo"]
    cells = [c.strip() for c in page.text if c.strip()]
    # each gate check: what the recipe wants, then what the file says
    for wanted in (
        ["IR version", "≥ 7"],
        ["opset", "ai.onnx ≥ 13", "ai.onnx 17"],
        ["metadata task"],
    ):
        at = cells.index(wanted[0])
        assert cells[at : at + len(wanted)] == wanted
    assert cells[cells.index("metadata task") + 1 : cells.index("metadata task") + 3] == [
        "detect",
        "detect",
    ]
    assert "images: FLOAT [1, 3, height, width]" in section  # the gate's input
    assert "images: tensor(float) [1, 3, height, width]" in section  # the file's
    assert "a8w8 from f32" in " ".join(cells)
    # the weights are their own area in the picture
    leaves = [a for t, a in elements(html).tags if t == "rect" and a.get("class") == "leaf"]
    assert {a["data-runtime"] for a in leaves} >= {"model yolo", "fake", "shared"}


def test_a_package_of_several_targets_and_a_stage_no_package_carries(tmp_path: Path) -> None:
    """The Android module carries both ABIs: one picture, a box per target; a target no
    channel carries still gets its picture, as a stage."""
    from ortbundle.evidence.report.collect import packages
    from ortbundle.licensing.attribution import ComponentUse, TargetLicensing
    from ortbundle.stage.staging import StagedFile

    def target(name: str, sizes: dict[str, int]) -> TargetLicensing:
        files = tuple(StagedFile(p, n, "0" * 64) for p, n in sorted(sizes.items()))
        use = ComponentUse("ort", "1", "MIT", ("MIT",), "pkg:generic/ort@1", files, (), (), ())
        return TargetLicensing(name, (use,))

    licensing = [
        target("android-arm64-v8a", {"runtimes/a/liba.so": 3000, "runtimes/b/libb.so": 1000}),
        target("android-x86_64", {"runtimes/a/liba.so": 2000}),
        target("linux-aarch64", {"runtimes/a/liba.so": 500, "runtimes.json": 100}),
    ]
    views, scale = packages(tmp_path, ("apk", "nsis"), licensing)
    assert [(v.names, v.targets, v.size) for v in views] == [
        (("apk",), ("android-arm64-v8a", "android-x86_64"), 6000),
        (("stage linux-aarch64",), ("linux-aarch64",), 600),
    ]
    apk = views[0]
    boxes = {(b.kind, b.label): b for b in apk.boxes}
    area = apk.width * apk.height
    for name, size in (("android-arm64-v8a", 4000), ("android-x86_64", 2000)):
        box = boxes[("target", name)]
        assert box.w * box.h == pytest.approx(size / 6000 * area, rel=1e-4)
    assert sum(s.w for s in apk.segments) == pytest.approx(6000 * scale)
    assert {s.group: s.size for s in apk.segments} == {"a": 5000, "b": 1000}


@pytest.mark.slow
def test_a_memoised_page_is_used_only_while_intact(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    """The rendered page is memoised by its content (a warm build skips compiling the
    template); a stored page that no longer matches its hash is rendered afresh."""
    write_reported(fake)
    first = build(Project.at(fake.root, tmp_path / "one"), fake.options(), reporter)
    (stored,) = (fake.root / "cache" / "outputs" / "report").rglob("*.html")
    assert stored.read_bytes() == (first.version_dir / "report.html").read_bytes()
    stored.write_text("<html>tampered</html>")
    second = build(Project.at(fake.root, tmp_path / "two"), fake.options(), reporter)
    assert (second.version_dir / "report.html").read_bytes() == (
        first.version_dir / "report.html"
    ).read_bytes()
