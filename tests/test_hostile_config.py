"""Hostile inputs, configuration: a recipe, product or environment that reads as plausible and
would make a build lie (accept what the reference refuses, ship from a glob that matched
nothing) or crash (a value no output can represent).

Each case runs `invoke build` (run_build) and must stop with exit 2 before anything is
fetched or written, naming the file, the table, the key and the fix, with no traceback, or
(a drop that drops nothing) build and say so. The schema's own unit tests are in
tests/test_schema.py; here the mistakes come in the way a user writes them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle.cli.build import run_build
from ortbundle.cli.common import CommandFailed
from tests.helpers.project import FakeProject
from tests.helpers.toml_edit import edit_toml, set_key

CONFIG = ConfigError.exit_code


def _refused(fake: FakeProject) -> str:
    """What `invoke build` said as it refused the project (exit 2), with nothing fetched."""
    fake.server.requests.clear()
    with pytest.raises(CommandFailed) as failed:
        run_build(fake.options(), root=fake.root)
    message = str(failed.value)
    assert failed.value.code == CONFIG, message
    assert "Traceback" not in message
    assert not (fake.root / "dist").exists()
    return message


@pytest.mark.parametrize(
    ("dotted", "value"),
    [
        ("targets.linux-x86_64.roots", "libonnxruntime.so.*"),
        ("component.providers", "CPUExecutionProvider"),
    ],
)
def test_a_string_where_the_reference_says_list_is_refused(
    fake: FakeProject, dotted: str, value: str
) -> None:
    fake.write()
    set_key(fake.root / "recipes" / "fake.toml", dotted, value)
    message = _refused(fake)
    table, key = dotted.rsplit(".", 1)
    assert (
        f"`{key}`: must be a list of non-empty strings, not {value!r} in [{table}] of "
        "recipes/fake.toml"
    ) in message, message
    assert fake.server.requests == []


def test_a_string_for_drop_names_is_refused(fake: FakeProject) -> None:
    fake.write()

    def change(document: object) -> None:
        document["targets"]["linux-x86_64"]["drop"][0]["names"] = "onnxruntime_pybind11*"  # type: ignore[index]

    edit_toml(fake.root / "recipes" / "fake.toml", change)
    message = _refused(fake)
    assert (
        "`names`: must be a list of non-empty strings, not 'onnxruntime_pybind11*' in "
        "[targets.linux-x86_64.drop[0]] of recipes/fake.toml"
    ) in message, message


def test_a_waiver_sha256_may_still_be_one_string(fake: FakeProject, tmp_path: Path) -> None:
    """The one list key the README documents as "a string, or a list"."""
    from ortbundle.config.products import load_product

    fake.product_extra = (
        '\n[[waivers]]\nfile = "x.dll"\nlicense = "MIT"\nreason = "r"\nreviewer = "A Person"\n'
        f'sha256 = "{"a" * 64}"\n'
    )
    fake.write()
    product = load_product(fake.root / "manifests" / "fakeproduct.toml")
    assert product.waivers[0].sha256 == ("a" * 64,)
