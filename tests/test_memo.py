"""The memo facility: where an entry lives, what its key covers, that a release's memo keeps
and returns nothing, and that an entry altered on disk is computed again; that no module holds
a memo directory of its own; and that a build passes its memo down to every kind it keeps."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

import ortbundle._core.memo as memo_module
from ortbundle._core.memo import NO_MEMO, Memo, memo_key
from ortbundle.cli import run_build
from tests.helpers.project import FakeProject


class _Counted:
    """A computation that says how often it ran."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.runs = 0

    def __call__(self) -> Any:
        self.runs += 1
        return self.value


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_an_entry_lives_under_its_kind_sharded_by_its_key(tmp_path: Path) -> None:
    memo = Memo.for_build(tmp_path, release=False)
    key = memo_key(["x"])
    assert memo.on and memo.outputs == tmp_path / "outputs"
    shard = tmp_path / "outputs" / "binary-info" / key[:2]
    assert memo.entry("binary-info", key) == shard / f"{key}.json"
    assert memo.entry("binary-info", key, ".html") == shard / f"{key}.html"
    assert memo.entry("binary-info", key, "") == shard / key
    assert memo.entry("report", key) == tmp_path / "outputs" / "report" / key[:2] / f"{key}.json"


def test_a_release_keeps_and_returns_nothing(tmp_path: Path) -> None:
    for memo in (Memo.for_build(tmp_path, release=True), Memo.off(), NO_MEMO):
        assert not memo.on
        assert memo.entry("spdx", memo_key(["x"])) is None
        counted = _Counted(7)
        assert memo.remembered("facts", ["x"], counted, int, int) == 7
        assert memo.remembered("facts", ["x"], counted, int, int) == 7
        assert counted.runs == 2  # computed every time
        text = _Counted("<p>page</p>")
        for _ in range(2):
            assert memo.remembered_text("page", ["x"], text, suffix=".html") == "<p>page</p>"
        assert text.runs == 2
    assert _files(tmp_path) == []  # and nothing was written
    # a build's memo on the same cache keeps: computed once
    build = Memo.for_build(tmp_path, release=False)
    counted = _Counted(7)
    assert [build.remembered("facts", ["x"], counted, int, int) for _ in range(2)] == [7, 7]
    assert counted.runs == 1


def test_the_key_covers_every_part_in_order_the_version_and_the_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = memo_key(["a", "b"])
    assert key == memo_key(["a", "b"]) == memo_key(iter(["a", "b"]))
    others = [
        memo_key(parts)
        for parts in (
            ["b", "a"],  # the order
            ["a"],  # a part left out
            ["a", "b", ""],  # an empty part is a part
            ["ab"],  # where one part ends
            ["a", "b\0"],
            ["a", "c"],
            [],
        )
    ]
    assert key not in others and len(set(others)) == len(others)
    assert memo_key(["\ud800"]) != memo_key(["\ud801"])  # a lone surrogate is a part too
    bare = memo_key(["a", "b"], code=False)
    assert bare != key
    monkeypatch.setattr(memo_module, "code_digest", lambda: "another ortbundle")
    assert memo_key(["a", "b"]) != key  # a change to the tool's code moves the key
    assert memo_key(["a", "b"], code=False) == bare  # ... unless the fact does not depend on it
    monkeypatch.setattr(memo_module, "__version__", "0.0.0+another")
    assert memo_key(["a", "b"], code=False) != bare  # a new version moves every key


def test_each_kind_and_each_key_has_its_own_entry(tmp_path: Path) -> None:
    memo = Memo.for_build(tmp_path, release=False)
    one, two, three = _Counted(1), _Counted(2), _Counted(3)
    assert memo.remembered("facts", ["x"], one, int, int) == 1
    assert memo.remembered("facts", ["y"], two, int, int) == 2
    assert memo.remembered("other", ["x"], three, int, int) == 3
    assert (one.runs, two.runs, three.runs) == (1, 1, 1)
    assert len(_files(tmp_path / "outputs" / "facts")) == 2
    assert len(_files(tmp_path / "outputs" / "other")) == 1


def test_an_altered_json_entry_is_computed_again_and_kept_again(tmp_path: Path) -> None:
    memo = Memo.for_build(tmp_path, release=False)
    counted = _Counted({"n": 1})

    def remember() -> dict[str, int]:
        return memo.remembered("facts", ["x"], counted, dict, lambda kept: {"n": int(kept["n"])})

    assert remember() == {"n": 1}
    entry = memo.entry("facts", memo_key(["x"]))
    assert entry is not None and entry.is_file()
    assert remember() == {"n": 1} and counted.runs == 1  # from the entry
    for altered in ('{"n": 1', '{"m": 1}', ""):  # cut short, another shape, emptied
        entry.write_text(altered)
        runs = counted.runs
        assert remember() == {"n": 1}
        assert counted.runs == runs + 1
        assert remember() == {"n": 1} and counted.runs == runs + 1  # and kept again


def test_an_altered_text_entry_is_never_returned(tmp_path: Path) -> None:
    memo = Memo.for_build(tmp_path, release=False)
    page = _Counted("<p>ünïcode</p>\n")

    def remember() -> str:
        return memo.remembered_text("report", ["x"], page, suffix=".html")

    assert remember() == page.value
    entry = memo.entry("report", memo_key(["x"]), ".html")
    assert entry is not None and entry.read_text("utf-8") == page.value
    sidecar = entry.with_suffix(".sha256")
    assert sidecar.is_file()
    assert remember() == page.value and page.runs == 1
    entry.write_text("<p>evil</p>\n", "utf-8")  # the bytes change, the record does not
    assert remember() == page.value and page.runs == 2
    assert entry.read_text("utf-8") == page.value  # kept again
    sidecar.unlink()  # no record: nothing vouches for the entry
    assert remember() == page.value and page.runs == 3


def test_an_entry_that_cannot_be_written_only_costs_the_next_build(tmp_path: Path) -> None:
    (tmp_path / "outputs").write_text("not a directory")
    memo = Memo.for_build(tmp_path, release=False)
    counted = _Counted(5)
    assert memo.remembered("facts", ["x"], counted, int, int) == 5
    assert memo.remembered_text("page", ["x"], lambda: "text", suffix=".html") == "text"
    assert memo.remembered("facts", ["x"], counted, int, int) == 5
    assert counted.runs == 2


# --- no module holds a memo directory ------------------------------------------------------

_PACKAGE = Path(__file__).resolve().parents[1] / "ortbundle"
_MEMO_NAME = re.compile(r"memo|kept|keep", re.IGNORECASE)
_PLACE = re.compile(
    r"(^|\W)(Path \| None|None \| Path|Optional\[Path\])($|\W)"  # a place, or none
    r"|^(list|set|List|Set)\[Path\]$"  # a place held in a container (templating's _KEPT)
    r"|^dict\[.*, Path\]$"
)


def _module_state(source: str) -> list[str]:
    """What in a module's source lets a caller set where a memo lives, as module state: a
    `global` statement, a module-level place (`X: Path | None`, `X: list[Path]`), a slot
    called like a memo (None, or a list or set to fill), or a `keep_in` function. A dict
    keyed by path (what was read of each memo file) holds no place of its own."""
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.append(f"line {node.lineno}: global {', '.join(node.names)}")
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "keep_in":
            found.append(f"line {node.lineno}: def keep_in")
        if isinstance(node, ast.AnnAssign) and _PLACE.search(ast.unparse(node.annotation)):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
            continue
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        value = getattr(node, "value", None)
        settable = isinstance(value, (ast.List, ast.Set)) or (
            isinstance(value, ast.Constant) and value.value is None
        )
        for target in targets:
            if isinstance(target, ast.Name) and _MEMO_NAME.search(target.id) and settable:
                found.append(f"line {node.lineno}: {target.id}")
    return found


def test_the_scan_sees_the_module_globals_memos_were_kept_in() -> None:
    """The patterns spdx and templating used before the memo was passed explicitly."""
    spdx_before = (
        "_memo_dir: Path | None = None\n"
        "def keep_in(directory: Path | None) -> None:\n"
        "    global _memo_dir\n"
        "    _memo_dir = directory\n"
    )
    templating_before = "_KEPT: list[Path] = []\n"
    assert len(_module_state(spdx_before)) == 3
    assert len(_module_state(templating_before)) == 1
    assert _module_state("_memo_dir = None\n") != []
    assert _module_state("_KEPT = []\n") != []
    assert _module_state("_where: dict[str, Path] = {}\n") != []
    assert _module_state("_ENV: list[Environment] = []\nMAX_MEMO = 1 << 20\n") == []


def test_no_module_holds_a_memo_directory() -> None:
    """Every memo is passed down from the build (a parameter, or a field of what a step
    receives): no module keeps one a build sets and a release resets."""
    found = {
        str(path.relative_to(_PACKAGE)): state
        for path in sorted(_PACKAGE.rglob("*.py"))
        if (state := _module_state(path.read_text("utf-8")))
    }
    assert found == {}
    from ortbundle._core import templating
    from ortbundle.licensing import spdx

    assert not hasattr(templating, "keep_in") and not hasattr(spdx, "keep_in")


# --- the build passes it down ---------------------------------------------------------------


@pytest.mark.slow
def test_a_release_keeps_nothing_and_a_build_keeps_each_kind(written: FakeProject) -> None:
    """A release's memo is off all the way down (the SBOM too, which a release once kept);
    a build's reaches every step that keeps something, under the kinds' own names — the
    command's own verdicts on the built indexes among them."""
    outputs = written.root / "cache" / "outputs"
    run_build(written.options(release=True), root=written.root)
    assert not outputs.exists()
    run_build(written.options(), root=written.root)
    kinds = {p.name for p in outputs.iterdir()}
    assert {
        "members",
        "file-versions",
        "copyrights",
        "spdx",
        "rendered",
        "stage-tarball",
        "sbom",
        "report",
        "reachable",
    } <= kinds
