"""XML as the Maven readers meet it (settings.xml, the super POM, maven-metadata.xml): parsed
only when it declares no document type, and read by local name, namespace or not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ortbundle._core.errors import ConfigError, OrtbundleError

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element


class _DocumentType(Exception):
    """Raised from inside expat: the document declares a DTD."""


def parse_xml(
    body: bytes, *, what: str, file: str, error: type[OrtbundleError] = ConfigError
) -> Element:
    """Parse XML that declares no document type: a DTD is where entity-expansion attacks live,
    and no settings.xml, POM or maven-metadata.xml needs one. Imported lazily: a warm build
    reads no XML."""
    from xml.etree import ElementTree
    from xml.parsers import expat

    def refuse(*_args: object) -> None:
        raise _DocumentType

    screen = expat.ParserCreate()  # a first pass that sees the DTD, whatever the encoding
    screen.StartDoctypeDeclHandler = refuse
    screen.EntityDeclHandler = refuse
    try:
        screen.Parse(body, True)
        return ElementTree.fromstring(body)  # noqa: S314 - no DTD got past the screen above
    except _DocumentType:
        raise error(f"{what} declares a document type; refused", file=file) from None
    except (expat.ExpatError, ElementTree.ParseError) as exc:
        raise error(f"{what} is not well-formed XML ({exc})", file=file) from None


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]  # settings.xml and POMs may or may not carry a namespace


def xml_children(element: Element | None, name: str) -> Iterator[Element]:
    """Direct children by local name, namespace or not."""
    if element is None:
        return
    for child in element:
        if isinstance(child.tag, str) and _local(child.tag) == name:
            yield child


def xml_child(element: Element | None, *path: str) -> Element | None:
    for name in path:
        element = next(xml_children(element, name), None)
    return element


def xml_text(element: Element | None, *path: str) -> str:
    found = xml_child(element, *path)
    return (found.text or "").strip() if found is not None else ""
