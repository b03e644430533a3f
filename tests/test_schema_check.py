"""The schema checker over a small schema of its own: every kind of problem by its exact line.

tests/test_schema.py checks the real input files' schemas; here one made-up schema reaches
each branch of config/schema/check.py and problems.py, and each problem is asserted as the
user reads it (table, key, words, the nearest valid word, the fix).
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any

import pytest

from ortbundle.config.schema.check import Checker, walk_keys
from ortbundle.config.schema.definitions import Choices, Key, Pattern, Table
from ortbundle.config.schema.problems import ConfigProblems, Problem, nearest, raise_if_any

VENDORS = Choices("GPU vendor", "a test list", lambda: ("nvidia", "amd", "intel"))
ARCHES = Choices("architecture", "a test list", lambda: ("x86_64", "arm64"))
WORD = Pattern(re.compile(r"^[a-z][a-z0-9-]*$"), "lower-case letters, digits and -")

SOURCE = Table(
    "[sources.<id>]",
    "",
    (
        Key("kind", "string", "", required=True, choices=Choices("kind", "", lambda: ("url",))),
        Key("url", "string", "", when=("kind", ("url",))),
        Key("sha256", "strings", "", one=True),
    ),
)
TOP = Table(
    "top level",
    "",
    (
        Key("name", "string", "", required=True, pattern=WORD),
        Key("note", "string", "", blank=True),
        Key("vendor", "string", "", choices=VENDORS),
        Key("arch", "string", "", choices=ARCHES),
        Key("targets", "strings", "", nonempty=True),
        Key("uses", "strings", "", ref="sources"),
        Key("jobs", "integer", "", minimum=1),
        Key("level", "integer", "", minimum=3),
        Key("free", "integer", ""),
        Key("strict", "boolean", ""),
        Key("reviewed", "date", ""),
        Key("extra", "list", ""),
        Key("anything", "any", ""),
        Key(
            "sources",
            "table",
            "",
            table=Table(
                "[sources]", "", entries=Key("<id>", "table", "", table=SOURCE), entry_pattern=WORD
            ),
        ),
        Key(
            "vendors",
            "table",
            "",
            table=Table("[vendors]", "", entries=Key("<v>", "string", ""), entry_choices=VENDORS),
        ),
        Key(
            "take",
            "tables",
            "",
            nonempty=True,
            table=Table(
                "[[take]]",
                "",
                (Key("glob", "string", "", required=True),),
                one_of=("glob", "regex"),
            ),
        ),
        Key("empty", "table", "", table=Table("[empty]", "")),
    ),
)
GOOD: dict[str, Any] = {
    "name": "my-product",
    "note": "",
    "vendor": "nvidia",
    "targets": ["linux-x86_64"],
    "uses": ["wheel"],
    "jobs": 1,
    "level": 3,
    "free": -5,
    "strict": False,
    "reviewed": date(2026, 1, 2),
    "extra": [1, "two"],
    "anything": {"x": 1},
    "sources": {"wheel": {"kind": "url", "url": "https://example.invalid/a", "sha256": "ab"}},
    "vendors": {"amd": "red"},
    "take": [{"glob": "lib*"}],
}


def lines(data: dict[str, Any], relax: frozenset[str] = frozenset()) -> list[str]:
    """The problems of `data` checked as the table [a.b] (nested: every place is named)."""
    checker = Checker("p.toml", data, relax)
    checker.table(TOP, data, "a.b")
    assert all(p.path == "" for p in checker.problems)  # no full path unless one is given
    return [p.line() for p in checker.problems]


def with_(**changes: Any) -> dict[str, Any]:
    return {**GOOD, **changes}


def test_a_valid_file_has_no_problem() -> None:
    assert lines(GOOD) == []
    assert lines(with_(reviewed="2026-01-02")) == []  # a date may be written as a string


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (
            with_(nmae="x"),
            "`nmae`: unknown key in [a.b] of p.toml — did you mean `name`?",
        ),
        (
            {**GOOD, "empty": {"zzz": 1}},
            "`zzz`: unknown key in [a.b.empty] of p.toml — fix: this table takes no keys",
        ),
        (
            {k: v for k, v in GOOD.items() if k != "name"},
            "`name`: missing (a non-empty string) in [a.b] of p.toml",
        ),
        (with_(name=""), "`name`: must be a non-empty string, not '' in [a.b] of p.toml"),
        (with_(name=3), "`name`: must be a non-empty string, not 3 in [a.b] of p.toml"),
        (
            with_(name="My"),
            "`name`: 'My' is not lower-case letters, digits and - in [a.b] of p.toml",
        ),
        (
            with_(vendor="NVIDIA"),
            '`vendor`: \'NVIDIA\' is not a GPU vendor: use "nvidia", "amd" or "intel" in '
            "[a.b] of p.toml — did you mean `nvidia`?",
        ),
        (
            with_(arch="i386"),
            '`arch`: \'i386\' is not an architecture: use "x86_64" or "arm64" in [a.b] of p.toml',
        ),
        (
            with_(targets="linux-x86_64"),
            "`targets`: must be a list of non-empty strings, not 'linux-x86_64' in [a.b] of p.toml",
        ),
        (
            with_(targets=["a", ""]),
            "`targets`: must be a list of non-empty strings, not ['a', ''] in [a.b] of p.toml",
        ),
        (with_(targets=[]), "`targets`: must not be empty in [a.b] of p.toml"),
        (
            with_(uses=["wheeel"]),
            "`uses`: unknown source 'wheeel': this file has no [sources.wheeel] in [a.b] of p.toml"
            " — did you mean `wheel`?",
        ),
        (with_(jobs=0), "`jobs`: must be a positive integer, not 0 in [a.b] of p.toml"),
        (with_(level=2), "`level`: must be at least 3, not 2 in [a.b] of p.toml"),
        (with_(jobs=True), "`jobs`: must be an integer, not True in [a.b] of p.toml"),
        (with_(jobs="1"), "`jobs`: must be an integer, not '1' in [a.b] of p.toml"),
        (with_(strict=1), "`strict`: must be true or false, not 1 in [a.b] of p.toml"),
        (
            with_(reviewed="2026-13-01"),
            "`reviewed`: must be a date (YYYY-MM-DD), not '2026-13-01' in [a.b] of p.toml",
        ),
        (
            with_(reviewed=datetime(2026, 1, 2, 3, 4)),
            "`reviewed`: must be a date (YYYY-MM-DD), not datetime.datetime(2026, 1, 2, 3, 4) in "
            "[a.b] of p.toml",
        ),
        (
            with_(reviewed=20260102),
            "`reviewed`: must be a date (YYYY-MM-DD), not 20260102 in [a.b] of p.toml",
        ),
        (with_(extra="x"), "`extra`: must be a list, not 'x' in [a.b] of p.toml"),
        (
            with_(sources={"Wheel": 3}, uses=[]),
            "`Wheel`: a name that is not lower-case letters, digits and - in [a.b.sources] of p.toml",
        ),
        (
            with_(vendors={"nvdia": 3}),
            "`nvdia`: unknown GPU vendor in [a.b.vendors] of p.toml — did you mean `nvidia`?",
        ),
        (
            with_(sources={"wheel": {"kind": "file"}}),
            "`kind`: 'file' is not a kind: use \"url\" in [a.b.sources.wheel] of p.toml",
        ),
        (
            with_(take={"glob": "x"}),
            "`take`: must be an array of tables, not {'glob': 'x'} in [a.b] of p.toml",
        ),
        (with_(take=[]), "`take`: needs at least one entry in [a.b] of p.toml"),
        (
            with_(take=["lib*"]),
            "`take[0]`: must be a table, not 'lib*' in [a.b] of p.toml",
        ),
        (
            with_(sources="wheel", uses=[]),
            "`sources`: must be a table, not 'wheel' in [a.b] of p.toml",
        ),
        (
            with_(extra="x" * 50),
            f"`extra`: must be a list, not '{'x' * 36}... in [a.b] of p.toml",
        ),
    ],
)
def test_each_problem_is_one_line_naming_table_key_and_fix(data: dict[str, Any], line: str) -> None:
    assert lines(data) == [line]


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (
            with_(extra="x" * 38),  # a repr of exactly 40 characters is shown whole
            f"`extra`: must be a list, not '{'x' * 38}' in [a.b] of p.toml",
        ),
        (
            with_(extra="x" * 39),
            f"`extra`: must be a list, not '{'x' * 36}... in [a.b] of p.toml",
        ),
        (
            with_(sources={"w": {"kind": "url", "zzz": 1}}, uses=["w"]),
            "`zzz`: unknown key in [a.b.sources.w] of p.toml — fix: known keys here: kind, url, "
            "sha256",
        ),
        (
            {k: v for k, v in with_(uses=["w"]).items() if k != "sources"},
            "`uses`: unknown source 'w': this file has no [sources.w] in [a.b] of p.toml",
        ),
        (
            with_(sources="wheel", uses=[]),
            "`sources`: must be a table, not 'wheel' in [a.b] of p.toml",
        ),
        (
            with_(vendors={"amd": 3}),  # an entry's value is named by the entry, in its table
            "`amd`: must be a non-empty string, not 3 in [a.b.vendors] of p.toml",
        ),
    ],
)
def test_the_edges_of_shown_values_known_keys_and_references(
    data: dict[str, Any], line: str
) -> None:
    assert lines(data) == [line]


def test_a_scalar_where_a_top_level_table_belongs_is_named_in_the_top_level() -> None:
    """`sources = "wheel"` at the top of a file: the key is the table's own name, and the
    place is the top level, not a table of that name."""
    checker = Checker("p.toml", {})
    checker.table(TOP, with_(sources="wheel", uses=[]), "")
    assert [p.line() for p in checker.problems] == [
        "`sources`: must be a table, not 'wheel' in the top level of p.toml"
    ]


def test_a_missing_key_of_a_type_without_words_names_its_type() -> None:
    table = Table("[t]", "", (Key("blob", "any", "", required=True),))
    checker = Checker("p.toml", {})
    checker.table(table, {}, "t")
    assert [p.line() for p in checker.problems] == ["`blob`: missing (any) in [t] of p.toml"]


def test_a_noun_is_given_its_article() -> None:
    for what, article in (("XML dialect", "a"), ("architecture", "an"), ("vendor", "a")):
        key = Key("k", "string", "", choices=Choices(what, "", lambda: ("z",)))
        checker = Checker("p.toml", {"k": "y"})
        checker.table(Table("[t]", "", (key,)), {"k": "y"}, "t")
        assert checker.problems[0].message == f"'y' is not {article} {what}: use \"z\""


def test_a_nested_problem_names_the_nested_table() -> None:
    data = with_(
        take=[{"glob": "a"}, {"glob": "b", "regex": "c"}], sources={"w": {"kind": "x"}}, uses=["w"]
    )
    assert lines(data) == [
        "`kind`: 'x' is not a kind: use \"url\" in [a.b.sources.w] of p.toml",
        "`regex`: unknown key in [a.b.take[1]] of p.toml — fix: known keys here: glob",
        "`glob | regex`: name exactly one of glob, regex in [a.b.take[1]] of p.toml",
    ]


def test_a_key_that_applies_only_beside_another_value_says_so() -> None:
    data = with_(sources={"w": {"kind": "file", "url": "x"}})
    kind = Key("kind", "string", "", choices=Choices("kind", "", lambda: ("url", "file")))
    table = Table("[s]", "", (kind, Key("url", "string", "", when=("kind", ("url", "git")))))
    checker = Checker("p.toml", data)
    checker.table(table, data["sources"]["w"], "sources.w")
    assert [p.line() for p in checker.problems] == [
        "`url`: applies only when kind is url or git in [sources.w] of p.toml"
    ]


def test_a_required_key_only_beside_another_value_is_missing_only_there() -> None:
    table = Table(
        "[s]",
        "",
        (
            Key("kind", "string", ""),
            Key("url", "string", "", required=True, when=("kind", ("url",))),
        ),
    )
    for data, expected in (
        ({"kind": "url"}, ["`url`: missing (a non-empty string) in [s] of p.toml"]),
        ({"kind": "git"}, []),
    ):
        checker = Checker("p.toml", data)
        checker.table(table, data, "s")
        assert [p.line() for p in checker.problems] == expected


def test_a_relaxed_key_is_neither_required_nor_checked() -> None:
    data = {k: v for k, v in GOOD.items() if k != "name"}
    assert lines(data, frozenset({"name"})) == []
    assert lines(with_(name=3), frozenset({"name"})) == []


def test_a_list_naming_an_entry_twice_says_each_once() -> None:
    assert lines(with_(targets=["b", "a", "b", "a", "c"])) == [
        "`targets`: lists 'a' twice in [a.b] of p.toml",
        "`targets`: lists 'b' twice in [a.b] of p.toml",
    ]


def test_one_string_is_a_list_only_for_a_key_that_allows_it() -> None:
    assert lines(with_(sources={"w": {"kind": "url", "sha256": ""}}, uses=["w"])) == [
        "`sha256`: must be a list of non-empty strings, not '' in [a.b.sources.w] of p.toml"
    ]


def test_every_problem_is_collected_not_only_the_first() -> None:
    assert len(lines(with_(name="", jobs=0, strict="no", nmae=1))) == 4


def test_walk_keys_visits_every_key_depth_first() -> None:
    inner = Table("[o.i]", "", (Key("leaf", "string", ""),))
    outer = Table("[o]", "", (Key("i", "table", "", table=inner),))
    nested = Table("top", "", (Key("o", "table", "", table=outer),))
    assert [(p, k.name) for p, k in walk_keys(nested)] == [("", "o"), ("o", "i"), ("o.i", "leaf")]
    places = [(prefix, key.name) for prefix, key in walk_keys(TOP)]
    assert places[:2] == [("", "name"), ("", "note")]
    assert ("sources", "<id>") in places
    assert ("sources.<id>", "kind") in places
    assert ("take", "glob") in places
    assert places.index(("sources", "<id>")) < places.index(("sources.<id>", "kind"))
    assert places.index(("sources.<id>", "sha256")) < places.index(("", "vendors"))


# --- problems.py -----------------------------------------------------------------------------


def test_one_problem_is_one_line_and_several_are_listed() -> None:
    one = Problem("recipes/x.toml", "component", "nmae", "unknown key", "name", "", "/abs/x.toml")
    assert (
        one.line() == "`nmae`: unknown key in [component] of recipes/x.toml — did you mean `name`?"
    )
    error = ConfigProblems([one])
    assert (error.message, error.file) == (
        "1 configuration problem in recipes/x.toml",
        "/abs/x.toml",
    )
    assert str(error) == one.line() + " [file /abs/x.toml]"
    two = Problem("recipes/y.toml", "", "k", "missing", fix="add it")
    both = ConfigProblems([one, two])
    assert both.message == "2 configuration problems in recipes/x.toml, recipes/y.toml"
    assert both.file is None  # two files: none is named alone
    assert str(both) == (
        "2 configuration problems in recipes/x.toml, recipes/y.toml:\n"
        f"  - {one.line()}\n"
        "  - `k`: missing in the top level of recipes/y.toml — fix: add it"
    )
    same = ConfigProblems([two, Problem("recipes/y.toml", "t", "j", "bad")])
    assert same.file == "recipes/y.toml"
    assert str(same).startswith("2 configuration problems in recipes/y.toml:\n")  # no [file]
    assert same.exit_code == 2


def test_raise_if_any_raises_only_for_a_problem() -> None:
    raise_if_any([])
    raise_if_any(iter([]))
    problem = Problem("a.toml", "", "k", "bad")
    with pytest.raises(ConfigProblems) as caught:
        raise_if_any(iter([problem]))
    assert caught.value.problems == (problem,)


@pytest.mark.parametrize(
    ("word", "candidates", "found"),
    [
        ("NAME", ["name", "note"], "name"),  # case never hides one
        ("nmae", ["name", "note"], "name"),
        ("zzzz", ["name", "note"], ""),
        ("linux-x86", ["linux-x86_64", "linux-aarch64"], "linux-x86_64"),
    ],
)
def test_nearest_is_the_close_candidate_or_none(
    word: str, candidates: list[str], found: str
) -> None:
    assert nearest(word, candidates) == found
