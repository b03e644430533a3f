"""Everything checkable without the network or the archives is checked before either, and
named by file, table and key: a product URL with whitespace, an unknown target in a recipe or
a product, a recipe URL that is no URL, a broken licence policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from ortbundle.cli.build import run_build
from ortbundle.cli.common import CommandFailed
from tests.helpers.project import FakeProject


def _refused_before_any_request(fake: FakeProject, *needles: str) -> str:
    fake.server.requests.clear()
    with pytest.raises(CommandFailed) as failed:
        run_build(fake.options(), root=fake.root)
    message = str(failed.value)
    assert failed.value.code == 2, message
    for needle in needles:
        assert needle in message, message
    assert fake.server.requests == []  # not the index, not a file
    assert not (fake.root / "cache" / "sha256").exists()
    assert not (fake.root / "dist").exists()
    return message


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    "url",
    [
        "https://example.invalid/a b",
        "https://example.invalid/\ttab",
        "https://exa\u200bmple.invalid/",
    ],
    ids=["space", "tab", "zero-width"],
)
def test_a_product_url_with_whitespace_is_refused_at_load(fake: FakeProject, url: str) -> None:
    fake.write()
    manifest = fake.root / "manifests" / "fakeproduct.toml"
    _edit(manifest, 'url = "https://example.invalid/"', f'url = "{url}"'.replace("\t", "\\t"))
    _refused_before_any_request(
        fake, f"file {manifest}", "product: url", "whitespace or control characters"
    )


def test_a_product_url_that_is_no_http_url_is_refused_at_load(fake: FakeProject) -> None:
    fake.write()
    manifest = fake.root / "manifests" / "fakeproduct.toml"
    _edit(manifest, 'url = "https://example.invalid/"', 'url = "javascript:alert(1)"')
    _refused_before_any_request(fake, f"file {manifest}", "`url`", "[product]", "http(s) URL")


def test_an_unknown_target_in_a_recipe_names_the_recipe_file(fake: FakeProject) -> None:
    fake.write()
    recipe = fake.root / "recipes" / "fake.toml"
    _edit(recipe, "[targets.windows-x86_64]", "[targets.windows-x86-64]")
    _refused_before_any_request(
        fake,
        f"file {recipe}",
        "`windows-x86-64`: unknown target in [targets]",
        "did you mean `windows-x86_64`?",
    )


def test_an_unknown_target_in_a_product_names_the_product_file(fake: FakeProject) -> None:
    fake.write()
    manifest = fake.root / "manifests" / "fakeproduct.toml"
    _edit(manifest, '"windows-x86_64"]', '"windows-x86_46"]')
    _refused_before_any_request(
        fake,
        f"file {manifest}",
        "[product]",
        "'windows-x86_46' is not a target",
        "`windows-x86_64`",
    )


def test_a_recipe_url_source_with_whitespace_is_refused_at_load(fake: FakeProject) -> None:
    fake.write()
    recipe = fake.root / "recipes" / "fake.toml"
    text = recipe.read_text()
    start = text.index("pypi = {", text.index("[sources.windows]"))
    end = text.index("\n", start)
    recipe.write_text(text[:start] + 'url = "https://example.invalid/x .whl"' + text[end:])
    _refused_before_any_request(fake, f"file {recipe}", "sources.windows: url", "whitespace")


def test_a_broken_licence_policy_is_refused_before_any_download(fake: FakeProject) -> None:
    """The audit reads the policy after staging; the preflight reads it first."""
    fake.policy = fake.policy + "\n[sets\n"
    fake.write()
    _refused_before_any_request(
        fake, f"file {fake.root / 'licenses' / 'policy.toml'}", "not valid TOML"
    )
