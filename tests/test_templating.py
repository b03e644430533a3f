"""Renderings kept by everything they depend on: reused exactly, never for another context."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ortbundle._core.memo import Memo
from ortbundle._core.progress import Reporter
from ortbundle._core.templating import render, rendering_key
from ortbundle.pipeline.build import build
from tests.helpers.probe import run_python
from tests.helpers.project import FakeProject


@dataclass(frozen=True)
class _Item:
    name: str
    size: int
    tags: frozenset[str] = frozenset()
    hidden: str = field(default="", repr=False)  # not in repr: the key must still see it


def _shell(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def memo(cache: Path) -> Memo:
    """A build's memo, as build() passes it to every rendering."""
    return Memo.for_build(cache, release=False)


def test_the_key_sees_every_field_and_the_order_a_template_iterates() -> None:
    base = {"items": [_Item("a", 1), _Item("b", 2)], "where": Path("/opt/x")}
    key = rendering_key("PKGBUILD.j2", base, {"bash": _shell})
    assert key == rendering_key("PKGBUILD.j2", dict(base), {"bash": _shell})
    others = [
        {**base, "items": [_Item("b", 2), _Item("a", 1)]},  # order
        {**base, "items": [_Item("a", 1), _Item("b", 3)]},  # a field
        {**base, "items": [_Item("a", 1, hidden="x"), _Item("b", 2)]},  # a field left out of repr
        {**base, "where": Path("/opt/y")},
        {**base, "where": "/opt/x"},  # a string is not a path
        {**base, "extra": None},
    ]
    assert key not in {rendering_key("PKGBUILD.j2", c, {"bash": _shell}) for c in others}
    assert key != rendering_key("NOTICE.j2", base, {"bash": _shell})
    assert key != rendering_key("PKGBUILD.j2", base, {"q": _shell})
    # sets are written sorted: the same set is the same key whatever its iteration order
    assert rendering_key("N", {"s": _Item("a", 1, frozenset({"x", "y"}))}, {}) == rendering_key(
        "N", {"s": _Item("a", 1, frozenset({"y", "x"}))}, {}
    )


def test_what_cannot_be_written_down_is_never_kept(cache: Path, memo: Memo) -> None:
    def closure(value: str) -> str:
        return value + suffix

    suffix = "!"
    assert rendering_key("N", {"x": 1}, {"f": closure}) is None
    assert rendering_key("N", {"x": 1}, {"f": lambda v: v}) is None
    assert rendering_key("N", {"x": object()}, {}) is None
    assert rendering_key("N", {"x": [1, {"y": object()}]}, {}) is None
    render(_TEMPLATE, _GRADLE, {"kotlin_string": lambda v: json.dumps(v)}, memo=memo)
    assert not cache.exists()  # rendered, not kept


# the Android module's Gradle file: a template of plain names and one filter
_GRADLE = {
    "compile_sdk": 35,
    "min_sdk": 24,
    "namespace": "invalid.app.runtime",
    "use_legacy_packaging": "true",
    "no_compress": ["onnx", "ort"],
}
_TEMPLATE = "apk/build.gradle.kts.j2"


def _kotlin(value: str) -> str:
    return json.dumps(value)


def test_a_kept_rendering_is_reused_and_an_altered_one_is_not(cache: Path, memo: Memo) -> None:
    first = render(_TEMPLATE, _GRADLE, {"kotlin_string": _kotlin}, memo=memo)
    assert '"invalid.app.runtime"' in first
    entries = list((cache / "outputs" / "rendered").rglob("*.txt"))
    assert len(entries) == 1, "the rendering was not kept"
    assert entries[0].read_text("utf-8") == first
    assert render(_TEMPLATE, _GRADLE, {"kotlin_string": _kotlin}, memo=memo) == first
    other = render(_TEMPLATE, {**_GRADLE, "min_sdk": 26}, {"kotlin_string": _kotlin}, memo=memo)
    assert "26" in other and other != first  # another context: rendered, not the kept one
    # an entry altered on disk fails its recorded SHA-256: rendered again, and kept again
    entries[0].write_bytes(entries[0].read_bytes().replace(b"invalid.app", b"evil.app"))
    assert render(_TEMPLATE, _GRADLE, {"kotlin_string": _kotlin}, memo=memo) == first
    assert entries[0].read_text("utf-8") == first


_RENDER = """
import json, sys
from pathlib import Path
from ortbundle._core.memo import Memo
from ortbundle._core.templating import render
from tests.test_templating import _GRADLE, _TEMPLATE, _kotlin
memo = Memo.for_build(Path(sys.argv[1]), release=False)
text = render(_TEMPLATE, _GRADLE, {"kotlin_string": _kotlin}, memo=memo)
print(json.dumps([text, "jinja2" in sys.modules]))
"""


def _render_in_a_process(cache: Path) -> tuple[str, bool]:
    text, imported = json.loads(run_python(_RENDER, str(cache)))
    return str(text), bool(imported)


def test_nothing_is_kept_unless_a_build_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORTBUNDLE_CACHE_DIR", str(tmp_path))
    # `invoke docs`, `invoke ci-workflow`: no build, no memo
    first = render(_TEMPLATE, _GRADLE, {"kotlin_string": _kotlin})
    assert render(_TEMPLATE, _GRADLE, {"kotlin_string": _kotlin}) == first
    kept = [p for p in tmp_path.rglob("*") if p.is_file() and "templates" not in p.parts]
    assert kept == []  # (jinja's compiled templates aside)


@pytest.mark.slow
def test_a_release_renders_afresh_and_a_build_keeps(
    written: FakeProject, reporter: Reporter
) -> None:
    """A release re-reads every memoised input: it neither uses nor leaves kept renderings."""
    kept = written.root / "cache" / "outputs" / "rendered"
    build(written.project, written.options(release=True), reporter)
    assert not kept.exists()
    build(written.project, written.options(), reporter)
    assert [p for p in kept.rglob("*") if p.is_file()]


def test_a_second_process_renders_from_the_cache_without_jinja(cache: Path) -> None:
    first, imported = _render_in_a_process(cache)
    assert imported
    second, imported = _render_in_a_process(cache)
    assert second == first and not imported
