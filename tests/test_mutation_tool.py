"""invoke mutation's own parts: the module mapping (data in pyproject.toml), choosing modules,
scoring mutmut's verdicts, and forgetting survivors so a new test is tried against them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devtools.mutation import (
    UNLINKED,
    MutationModule,
    _retest_survivors,
    load_modules,
    score,
    select,
    work_dir,
)
from ortbundle._core.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def test_the_mapping_names_the_modules_that_refuse_with_files_that_exist() -> None:
    modules = {m.name: m for m in load_modules(ROOT)}  # every path is checked to exist
    assert {"closure", "trust", "download", "member-name", "archives", "waivers"} <= set(modules)
    assert modules["member-name"].functions == ("check_member_name",)
    assert modules["member-name"].mutants == ("ortbundle._core.fsio.x_check_member_name__mutmut_*",)
    assert modules["closure"].mutants == ()  # every mutant of the file


def _project(tmp_path: Path, mapping: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(mapping, encoding="utf-8")
    return tmp_path


def test_a_mapping_naming_a_missing_file_is_refused(tmp_path: Path) -> None:
    root = _project(tmp_path, '[tool.ortbundle.mutation.x]\nsources = ["a.py"]\ntests = ["t.py"]\n')
    with pytest.raises(ConfigError) as caught:
        load_modules(root)
    assert caught.value.message == "mutation module x names a.py, which does not exist"
    with pytest.raises(ConfigError, match="no module is set up for mutation testing"):
        load_modules(_project(tmp_path, "[tool.other]\n"))


def test_modules_are_chosen_by_name_and_an_unknown_one_is_refused() -> None:
    modules = (MutationModule("a", ("a.py",), ()), MutationModule("b", ("b.py",), ()))
    assert select(modules, []) == modules
    assert select(modules, ["b"]) == (modules[1],)
    with pytest.raises(ConfigError) as caught:
        select(modules, ["b", "c"])
    assert (caught.value.message, caught.value.fix) == (
        "no mutation module named c",
        "choose from a, b",
    )


def _meta(mutants: Path, source: str, codes: dict[str, int | None]) -> Path:
    path = mutants / f"{source}.meta"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"exit_code_by_key": codes, "other": 1}), encoding="utf-8")
    return path


def test_the_score_counts_timeouts_as_killed_and_unreached_mutants_as_survivors(
    tmp_path: Path,
) -> None:
    codes = {
        "pkg.m.x_f__mutmut_1": 1,
        "pkg.m.x_f__mutmut_2": 3,
        "pkg.m.x_f__mutmut_3": 0,
        "pkg.m.x_g__mutmut_1": 33,
        "pkg.m.x_g__mutmut_2": 36,
        "pkg.m.x_g__mutmut_3": 1,
        "pkg.m.x_g__mutmut_4": None,
    }
    _meta(tmp_path, "pkg/m.py", codes)
    module = MutationModule("m", ("pkg/m.py",), ())
    result = score(module, tmp_path, 12.5)
    assert (
        result.mutants,
        result.killed,
        result.survived,
        result.timeouts,
        result.no_tests,
        result.other,
    ) == (7, 3, 2, 1, 1, 1)
    assert result.percent == pytest.approx(100 * 4 / 7)
    assert result.survivors == ("pkg.m.x_f__mutmut_3", "pkg.m.x_g__mutmut_1")
    only_g = score(MutationModule("m", ("pkg/m.py",), (), functions=("g",)), tmp_path, 1.0)
    assert (only_g.mutants, only_g.killed, only_g.timeouts) == (4, 1, 1)


def test_survivors_are_forgotten_and_kills_kept(tmp_path: Path) -> None:
    path = _meta(tmp_path, "pkg/m.py", {"a": 1, "b": 0, "c": 33, "d": 36})
    _retest_survivors(MutationModule("m", ("pkg/m.py", "pkg/none.py"), ()), tmp_path)
    meta = json.loads(path.read_text(encoding="utf-8"))
    assert meta == {"exit_code_by_key": {"a": 1, "b": None, "c": None, "d": 36}, "other": 1}


def test_a_work_directory_links_the_repository_but_not_its_outputs(tmp_path: Path) -> None:
    for name in ("ortbundle", "tests", "dist", ".git", "x.egg-info"):
        (tmp_path / name).mkdir()
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    where = work_dir(tmp_path, MutationModule("m", (), ()))
    assert where == tmp_path / ".mutation" / "m"
    assert sorted(p.name for p in where.iterdir()) == ["ortbundle", "pyproject.toml", "tests"]
    assert (where / "ortbundle").resolve() == tmp_path / "ortbundle"
    assert work_dir(tmp_path, MutationModule("m", (), ())) == where  # again: nothing to do
    assert {".git", "dist", ".mutation", "mutants"} <= UNLINKED
