"""The checks of :func:`toolflow.open_engine`'s arguments: a wrong one fails at once, naming it, not later at a call.

Moved out of :mod:`toolflow._executor` to make room there (750 lines at most per module).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from toolflow._errors import expect, expect_count, expect_names
from toolflow._plugins import Plugins
from toolflow._registry import Registry
from toolflow._state import StateBackend

__all__ = ["check_arguments", "positive_seconds"]

_ARGUMENT_TYPES: tuple[tuple[str, type | tuple[type, ...], str], ...] = (
    ("registry", Registry, "a toolflow.Registry (from toolflow.load_registry())"),
    ("plugins", (Plugins, type(None)), "a toolflow.Plugins or None"),
    ("cache_path", (str, os.PathLike, type(None)), "a path or None"),
    ("cache_backend", (str, type(None)), "a backend's name or None"),
    ("cache_options", (Mapping, type(None)), "a mapping or None"),
    ("state", (StateBackend, type(None)), "a state backend or None"),
    ("conversation", (str, type(None)), "a conversation's id or None"),
)
_ARGUMENT_COUNTS = (("max_concurrency", 1, False), ("max_threads", 1, True), ("max_malformed", 0, False))


def check_arguments(arguments: Mapping[str, object]) -> None:
    """The checks of :func:`open_engine`'s *arguments*, by name (a wrong one would fail later, at a call)."""
    for name, types, what in _ARGUMENT_TYPES:
        expect(arguments[name], types, f"open_engine: {name}", what)
    for name, minimum, optional in _ARGUMENT_COUNTS:
        expect_count(arguments[name], f"open_engine: {name}", minimum=minimum, optional=optional)
    expect_names(arguments["allowlist"], "open_engine: allowlist", what="tool names", optional=True)
    if not callable(arguments["clock"]):
        msg = f"open_engine: clock must be a function returning seconds, got {type(arguments['clock']).__name__!r}"
        raise TypeError(msg)
    positive_seconds("open_engine: conversation_ttl", arguments["conversation_ttl"])  # type: ignore[arg-type]


def positive_seconds(name: str, value: float) -> float:
    """*value* when it is a positive, finite number of seconds; else ValueError naming *name*."""
    if not 0 < value < math.inf:
        msg = f"{name} must be a positive number of seconds, got {value!r}"
        raise ValueError(msg)
    return value
