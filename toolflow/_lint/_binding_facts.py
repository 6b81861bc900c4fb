"""Facts about implementation bindings that the TF4xx rules share.

Lint never imports a plugin's implementation: a bound callable is inspected
only when the plugin registered the callable itself, or when its lazy
``"module:attr"`` target names a module that is already imported.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs

from toolflow._lint._rule import LintContext
from toolflow._model import Implementation, ToolSpec
from toolflow._schemas import json_pointer

__all__ = [
    "Accepts",
    "Declared",
    "Target",
    "declared",
    "describe_target",
    "implementations",
    "inspect_target",
    "property_pointer",
]

NAMED = "implementation"
"""The spec key that names a bound implementation."""

CONTEXT_PARAMETER = "ctx"
"""The keyword an implementation may take for the call's context, with a default."""


def implementations(ctx: LintContext) -> Iterator[tuple[ToolSpec, Implementation, str]]:
    """``(tool, implementation, name)`` for every ``implementation: name`` of the linted tools."""
    for tool in ctx.tools:
        for implementation in tool.implementations:
            if implementation.kind == NAMED and isinstance(implementation.config, str):
                yield tool, implementation, implementation.config


def property_pointer(tool: ToolSpec, name: str) -> str:
    """The pointer of parameter *name* under the tool's ``parameters.properties``."""
    return tool.pointer + json_pointer(["parameters", "properties", name])


def describe_target(target: object) -> str:
    """Name a binding's target for messages: the lazy string, or ``module.qualname`` of the callable."""
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", None) or getattr(type(target), "__qualname__", "")
    return f"{module}:{qualname}" if module and qualname else repr(target)


@attrs.frozen(kw_only=True)
class Accepts:
    """What a callable's signature accepts as keyword arguments."""

    keywords: frozenset[str]
    """Parameters that a keyword argument can fill."""
    any_keyword: bool
    """The callable takes ``**kwargs``."""
    required: tuple[str, ...]
    """Keyword-fillable parameters without a default, in signature order."""
    positional_only: tuple[str, ...]
    """Positional-only parameters without a default: no keyword argument can fill them."""


@attrs.frozen(kw_only=True)
class Target:
    """A bound target as lint sees it: its signature, or why it cannot be called."""

    accepts: Accepts | None = None
    problem: str | None = None


def inspect_target(target: object) -> Target | None:
    """Inspect a binding's target without importing anything; ``None`` when it cannot be looked at."""
    value: Any
    if isinstance(target, str):
        module_name, _, attribute = target.partition(":")
        module = sys.modules.get(module_name)
        if module is None or not attribute:
            return None
        parts = attribute.split(".")
        namespace = vars(module)
        if parts[0] not in namespace:
            if "__getattr__" in namespace:
                return None  # the module makes attributes on demand, perhaps by importing
            return Target(problem=f"module {module_name!r} has no attribute {parts[0]!r}")
        value = namespace[parts[0]]
        for index, part in enumerate(parts[1:], start=1):
            try:
                value = getattr(value, part)
            except Exception:  # noqa: BLE001 - any failure means the attribute is not there
                owner = f"{module_name}:{'.'.join(parts[:index])}"
                return Target(problem=f"{owner!r} has no attribute {part!r}")
    else:
        value = target
    if not callable(value):
        return Target(problem=f"it is a {type(value).__name__}, which is not callable")
    accepts = _accepts(value)
    return Target(accepts=accepts) if accepts is not None else None


def _accepts(value: Callable[..., Any]) -> Accepts | None:
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):  # builtins and extension types may have no signature
        return None
    keywords: set[str] = set()
    required: list[str] = []
    positional_only: list[str] = []
    any_keyword = False
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            any_keyword = True
        elif parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        elif parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            if parameter.default is inspect.Parameter.empty:
                positional_only.append(parameter.name)
        else:
            keywords.add(parameter.name)
            if parameter.default is inspect.Parameter.empty:
                required.append(parameter.name)
    return Accepts(
        keywords=frozenset(keywords),
        any_keyword=any_keyword,
        required=tuple(required),
        positional_only=tuple(positional_only),
    )


COMPOSITION = ("$ref", "$dynamicRef", "allOf", "anyOf", "oneOf", "if", "dependentSchemas", "patternProperties")
"""Top-level keywords that may declare or require parameters beyond ``properties`` and ``required``."""


@attrs.frozen(kw_only=True)
class Declared:
    """The parameters a tool's schema declares, and those every call is sure to carry."""

    names: tuple[str, ...]
    present: frozenset[str]
    """Required, or filled in from a ``default``."""
    complete: bool
    """False when composition keywords may declare or require more than the top level shows."""


def declared(parameters: Mapping[str, Any]) -> Declared | None:
    """What *parameters* declares at the top level; ``None`` when ``properties`` is not a mapping."""
    properties = parameters.get("properties", {})
    if not isinstance(properties, Mapping):
        return None
    required = parameters.get("required", [])
    required_names = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    names = tuple(str(name) for name in properties)
    present = {
        name
        for name in names
        if name in required_names or (isinstance(properties[name], Mapping) and "default" in properties[name])
    }
    return Declared(
        names=names,
        present=frozenset(present),
        complete=not any(keyword in parameters for keyword in COMPOSITION),
    )
