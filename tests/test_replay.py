"""A build whose key an earlier build had is replayed: the kept tree put in place, byte for byte,
with no pipeline step imported (ortbundle/pipeline/replay.py); a kept file altered behind its
record, or a report that would compare with another version, and the build runs in full."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import jsonschema

from ortbundle.evidence.names import SUMMARY_NAME
from ortbundle.pipeline.replay import KIND
from tests.helpers.faults import assert_published_and_verified, snapshot
from tests.helpers.probe import run_python
from tests.helpers.project import FakeProject

SCHEMA = Path(__file__).resolve().parents[1] / "ortbundle" / "data" / "build-summary.schema.json"

# run_build in a fresh process into `dist`: what it printed, and the modules it loaded
_BUILD = """
import json, sys
from pathlib import Path
from ortbundle.cli import run_build
from ortbundle.config.project import BuildOptions
root, dist, cache, index, environ = sys.argv[1:6]
options = BuildOptions(
    product="fakeproduct", index_url=index, cache_dir=Path(cache), environ=json.loads(environ)
)
run_build(options, root=Path(root), dist=Path(dist))
print(json.dumps(sorted(sys.modules)))
"""

_STEPS = ("ortbundle.stage.step", "ortbundle.licensing.step", "ortbundle.channels.step")


def _build(fake: FakeProject, dist: Path) -> tuple[str, bool]:
    """(what a fresh `invoke build --dist` printed, whether it imported a pipeline step)."""
    out = run_python(
        _BUILD,
        str(fake.root),
        str(dist),
        str(fake.root / "cache"),
        fake.server.url,
        json.dumps(fake.environ),
    )
    *printed, modules = out.strip().splitlines()
    return "\n".join(printed), any(m in json.loads(modules) for m in _STEPS)


def _tree(dist: Path) -> dict[str, tuple[str, bytes, int, int]]:
    """snapshot() with each file's mtime: a replayed tree keeps the build's stamps too."""
    top = dist / "fakeproduct" / "1.2.3"
    return {
        name: (*entry, (top / name).lstat().st_mtime_ns if entry[0] == "file" else 0)
        for name, entry in snapshot(top).items()
    }


def _kept(fake: FakeProject) -> Path:
    (record,) = (fake.root / "cache" / "outputs" / KIND).glob("*/*/record.json")
    return record.parent


def test_the_same_build_into_another_dist_is_replayed_byte_for_byte(
    written: FakeProject,
) -> None:
    first = written.root / "dist"
    printed, stepped = _build(written, first)
    assert "replayed" not in printed and stepped
    other = written.root / "other"
    printed, stepped = _build(written, other)
    assert "replayed" in printed, printed
    assert not stepped, "a replay imports no step of the pipeline"
    assert _tree(other) == _tree(first)
    assert_published_and_verified(written, other)
    summary = json.loads((other / "fakeproduct" / "1.2.3" / SUMMARY_NAME).read_text())
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(summary)
    assert [p["name"] for p in summary["phases"]] == ["replay"]
    assert summary["paths"]["version_dir"] == str(other / "fakeproduct" / "1.2.3")
    printed, stepped = _build(written, other)  # and the replayed tree is a no-op's
    assert "up to date" in printed and not stepped
    packages = sorted(first.rglob("packaging/**/*.deb")) + sorted(other.rglob("packaging/**/*.deb"))
    assert len({p.stat().st_ino for p in packages}) == 2  # each dist/ its own copy


def test_a_kept_file_altered_behind_its_record_is_not_replayed(written: FakeProject) -> None:
    """Same size, mtime put back, only the ctime moved: the kept tree is discarded and the
    build runs in full, publishing what the first build did."""
    first = written.root / "dist"
    _build(written, first)
    notice = next((_kept(written) / "tree").rglob("NOTICE"))
    before = notice.stat()
    data = bytearray(notice.read_bytes())
    data[len(data) // 2] ^= 1
    notice.write_bytes(bytes(data))
    os.utime(notice, ns=(before.st_atime_ns, before.st_mtime_ns))
    other = written.root / "other"
    printed, stepped = _build(written, other)
    assert "replayed" not in printed and stepped
    assert _tree(other) == _tree(first)
    assert_published_and_verified(written, other)
    assert (_kept(written) / "tree" / notice.relative_to(_kept(written) / "tree")).read_bytes() == (
        first / "fakeproduct" / "1.2.3" / notice.relative_to(_kept(written) / "tree")
    ).read_bytes()  # kept anew by the full build


def test_a_dist_with_another_version_to_compare_with_is_not_replayed(
    written: FakeProject,
) -> None:
    """report.html compares with the newest older version in dist/<product>/: a tree kept
    from a dist/ with none would say otherwise."""
    _build(written, written.root / "dist")
    other = written.root / "other"
    older = other / "fakeproduct" / "1.0.0"
    older.mkdir(parents=True)
    printed, stepped = _build(written, other)
    assert "replayed" not in printed and stepped


def test_a_kept_tree_keeps_modes_links_and_no_summary(written: FakeProject) -> None:
    _build(written, written.root / "dist")
    kept = _kept(written)
    record = json.loads((kept / "record.json").read_text())
    assert SUMMARY_NAME not in record["files"] and record["packages"]
    for name, entry in record["files"].items():
        info = (kept / "tree" / name).lstat()
        assert stat.S_IMODE(info.st_mode) == entry["mode"], name
