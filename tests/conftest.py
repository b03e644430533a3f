from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ortbundle._core.progress import Reporter, plain_reporter
from tests.helpers.index_server import IndexServer
from tests.helpers.project import FakeProject


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
