"""The checks of :class:`toolflow.Agent`'s arguments: a wrong one would fail later, deep in a turn.

Kept apart from :mod:`toolflow._loop` to keep that module small.
"""

from __future__ import annotations

from collections.abc import Mapping

from toolflow._errors import UsageError, expect
from toolflow._executor import Engine
from toolflow._model import RetryPolicy
from toolflow._policy import Policy
from toolflow._providers import HISTORY_FORMATS, ModelProvider

__all__ = ["check_arguments", "check_format"]

_ARGUMENT_TYPES: tuple[tuple[str, type | tuple[type, ...], str], ...] = (
    ("engine", Engine, "a toolflow.Engine (from toolflow.open_engine())"),
    ("provider", ModelProvider, "a toolflow.ModelProvider (from toolflow.load_provider())"),
    ("policy", (Policy, type(None)), "a toolflow.Policy or None"),
    ("system", (str, type(None)), "a string or None"),
    ("deliberate", bool, "True or False"),
    ("model", str, "a string"),
    ("provider_retry", RetryPolicy, "a toolflow.RetryPolicy"),
    ("context", (Mapping, type(None)), "a mapping (a JSON object) or None"),
)


def check_arguments(arguments: Mapping[str, object]) -> None:
    """The type checks of :class:`Agent`'s *arguments* (a wrong one would fail later, deep in a turn)."""
    for name, types, what in _ARGUMENT_TYPES:
        expect(arguments[name], types, f"Agent: {name}", what)
    for name in ("approve", "on_turn"):
        if arguments[name] is not None and not callable(arguments[name]):
            msg = f"Agent: {name} must be a function or None, got {type(arguments[name]).__name__!r}"
            raise TypeError(msg)


def check_format(name: str, provider: ModelProvider) -> None:
    """Refuse a history format that does not exist or that *provider* cannot speak."""
    if name not in HISTORY_FORMATS:
        msg = f"unknown history format {name!r}; expected one of {', '.join(HISTORY_FORMATS)}"
        raise UsageError(msg)
    if name not in provider.formats:
        msg = (
            f"the {provider.name!r} provider cannot speak the {name!r} format; it speaks {', '.join(provider.formats)}"
        )
        raise UsageError(msg)
