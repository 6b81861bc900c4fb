"""Values JSON writers and schema checkers stumble on, shared by the odd-value tests."""

from __future__ import annotations

from typing import Any


def nested(levels: int) -> list[Any]:
    """A list holding a list ... *levels* deep, built without recursion."""
    outer: list[Any] = []
    inner = outer
    for _ in range(levels - 1):
        deeper: list[Any] = []
        inner.append(deeper)
        inner = deeper
    return outer
