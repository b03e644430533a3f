"""The README is a quick start and a list of pages (#41): every page of docs/ is on that list,
and every relative link of the README and the pages leads to a file that exists, so moving a
section does not leave a reader at a dead end."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers.bite import each

ROOT = Path(__file__).resolve().parents[1]

_LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(text: str) -> list[str]:
    """The targets of a page's Markdown links that point inside the repository."""
    return [t for t in _LINK.findall(text) if "://" not in t and not t.startswith(("#", "mailto:"))]


def test_the_link_reader_finds_relative_links_only() -> None:
    sample = "[a](docs/a.md) [b](https://example.org/b) [c](#c) [d](../d.md#part)"
    assert relative_links(sample) == ["docs/a.md", "../d.md#part"]


def test_every_relative_link_leads_to_a_file() -> None:
    pages = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *(ROOT / "docs").rglob("*.md")]
    dead = [
        f"{page.relative_to(ROOT)}: {target}"
        for page in each(pages, "pages")
        for target in relative_links(page.read_text("utf-8"))
        if not (page.parent / target.split("#")[0]).exists()
    ]
    assert dead == [], f"links to nothing: {dead}"


def test_the_readme_lists_every_page_of_docs() -> None:
    listed = set(relative_links((ROOT / "README.md").read_text("utf-8")))
    pages = each(sorted((ROOT / "docs").glob("*.md")), "pages of docs/")
    missing = [p.name for p in pages if f"docs/{p.name}" not in listed]
    assert missing == [], f"pages of docs/ the README does not link: {missing}"
