"""A squarified treemap (Bruls, Huizing, van Wijk 2000), computed here so the report needs no
script: each rectangle's area is its size's share of the parent's area, exactly, before the
coordinates are rounded for the SVG."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Rect = tuple[float, float, float, float]  # x, y, width, height


@dataclass(frozen=True)
class Node:
    """A file (no children) or a group; a group's size is the sum of its children's."""

    label: str
    size: int
    kind: str
    children: tuple[Node, ...] = ()
    runtime: str = ""
    component: str = ""


def group(label: str, kind: str, children: Sequence[Node], **where: str) -> Node:
    ordered = tuple(sorted(children, key=lambda n: (-n.size, n.label)))
    return Node(label, sum(c.size for c in ordered), kind, ordered, **where)


def _worst(row: Sequence[float], side: float) -> float:
    """The row's worst aspect ratio when laid along a side of this length."""
    total = sum(row)
    return max(max(row) * side * side / (total * total), total * total / (side * side * min(row)))


def squarify(sizes: Sequence[float], rect: Rect) -> list[Rect]:
    """Rectangles for `sizes` (sorted largest first, all > 0) that tile `rect` exactly."""
    x, y, w, h = rect
    total = sum(sizes)
    if total <= 0:
        return [(x, y, 0.0, 0.0) for _ in sizes]
    areas = [s * w * h / total for s in sizes]
    out: list[Rect] = []
    i = 0
    while i < len(areas):
        side = min(w, h)
        row = [areas[i]]
        i += 1
        while i < len(areas) and side > 0 and _worst([*row, areas[i]], side) <= _worst(row, side):
            row.append(areas[i])
            i += 1
        laid = sum(row)
        if w >= h:  # a column along the left edge
            width = laid / h if h else 0.0
            top = y
            for area in row:
                height = area / width if width else 0.0
                out.append((x, top, width, height))
                top += height
            x, w = x + width, w - width
        else:  # a row along the top edge
            height = laid / w if w else 0.0
            left = x
            for area in row:
                width = area / height if height else 0.0
                out.append((left, y, width, height))
                left += width
            y, h = y + height, h - height
    return out


def layout(node: Node, rect: Rect) -> list[tuple[Node, Rect]]:
    """Every node under `node` (itself excluded) with its rectangle, parents before children;
    nodes of size 0 take no room and are left out."""
    children = [c for c in node.children if c.size > 0]
    placed: list[tuple[Node, Rect]] = []
    for child, box in zip(children, squarify([c.size for c in children], rect), strict=True):
        placed.append((child, box))
        placed.extend(layout(child, box))
    return placed
