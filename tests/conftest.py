from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ortbundle._core.progress import Reporter, plain_reporter
from tests.helpers.index_server import IndexServer
from tests.helpers.project import FakeProject

# Test files that run longest, started first so that no worker is left with one at the end
# (pytest-xdist hands files out in collection order): Wine's, then the real tier's.
_LONG_FIRST = ("windows", "real")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the files by `_LONG_FIRST` (a stable sort: tests keep their order in a file)."""
    rank: dict[str, int] = {}
    for item in items:
        marks = {mark.name for mark in item.iter_markers()}
        here = min((n for n, name in enumerate(_LONG_FIRST) if name in marks), default=99)
        rank[item.nodeid.split("::")[0]] = min(rank.get(item.nodeid.split("::")[0], 99), here)
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])


@pytest.fixture(autouse=True)
def _output_unwrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output as a log gets it, each message on one line, whoever runs the suite: pytest-xdist
    gives its workers COLUMNS=80, which wraps messages the tests look for whole. A test of the
    wrapping sets COLUMNS itself."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def server() -> Iterator[IndexServer]:
    with IndexServer().running() as running:
        yield running


@pytest.fixture
def fake(tmp_path: Path, server: IndexServer) -> FakeProject:
    return FakeProject(root=tmp_path / "project", server=server)


@pytest.fixture
def reporter() -> Reporter:
    return plain_reporter()


@pytest.fixture
def written(fake: FakeProject) -> FakeProject:
    """The synthetic project with its wheels, recipe, product and key written and served."""
    return fake.write()
