"""Facts about tools computed once and shared by several rules (see :class:`ToolMemo`)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from toolflow._model import ToolSpec

__all__ = ["ToolMemo"]

T = TypeVar("T")


class ToolMemo(Generic[T]):
    """Facts about tools computed once and shared by several rules, dropped with their tool.

    Entries are keyed by tool identity (specs hold dicts, so they do not hash);
    a weak reference removes an entry when its tool goes, so that a later tool
    that happens to get the same ``id()`` never sees another tool's facts.
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[int, Hashable], tuple[weakref.ref[ToolSpec], T]] = {}

    def get(self, tool: ToolSpec, key: Hashable, compute: Callable[[], T]) -> T:
        """Return the facts of *tool* under *key*, computing them on first use."""
        entry_key = (id(tool), key)
        entry = self._entries.get(entry_key)
        if entry is not None and entry[0]() is tool:
            return entry[1]
        value = compute()

        def forget(ref: weakref.ref[ToolSpec]) -> None:
            current = self._entries.get(entry_key)
            if current is not None and current[0] is ref:
                del self._entries[entry_key]

        self._entries[entry_key] = (weakref.ref(tool, forget), value)
        return value
