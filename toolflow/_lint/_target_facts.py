"""What the providers that ``--target`` names accept in a tool definition (for the TF3xx and TF5xx rules).

The facts come from the providers' documentation and from the error messages
their APIs return; each rule module cites its sources in its docstring. Keep
this module free of checks: it holds the data and two small helpers the rules
share.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolflow._lint._rule import LintContext
from toolflow._model import SpecFile, ToolSpec

__all__ = [
    "GEMINI_KEYWORDS",
    "OPENAI_DESCRIPTION_MAX",
    "OPENAI_STRICT_MAX_DEPTH",
    "OPENAI_STRICT_MAX_ENUM_VALUES",
    "OPENAI_STRICT_MAX_PROPERTIES",
    "OPENAI_STRICT_UNSUPPORTED",
    "TOOL_COUNT_MAX",
    "TOP_LEVEL_REJECTED",
    "active_targets",
    "declares",
    "is_object_schema",
    "join_targets",
    "under",
]

TOP_LEVEL_REJECTED: Mapping[str, tuple[str, ...]] = {
    # "schema must have type 'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'const'/'not' at the top level"
    "openai": ("oneOf", "anyOf", "allOf", "enum", "const", "not"),
    # "input_schema does not support oneOf, allOf, or anyOf at the top level"
    "anthropic": ("oneOf", "anyOf", "allOf"),
}
"""Keywords a target rejects at the top level of the parameter schema, whatever their value."""

GEMINI_KEYWORDS = frozenset(
    {
        "anyOf",
        "default",
        "description",
        "enum",
        "example",
        "format",
        "items",
        "maxItems",
        "maxLength",
        "maxProperties",
        "maximum",
        "minItems",
        "minLength",
        "minProperties",
        "minimum",
        "nullable",
        "pattern",
        "properties",
        "propertyOrdering",
        "required",
        "title",
        "type",
    }
)
"""The fields of Gemini's ``Schema`` (a subset of the OpenAPI 3.0 schema object); any other key is refused."""

OPENAI_STRICT_UNSUPPORTED = (
    # documented as unsupported composition keywords
    "allOf",
    "not",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "if",
    "then",
    "else",
    # refused by the API ("'oneOf' is not permitted", "'propertyNames' is not permitted", ...)
    "oneOf",
    "propertyNames",
    "uniqueItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
    "minProperties",
    "maxProperties",
)
"""Keywords OpenAI's strict mode (Structured Outputs) refuses anywhere in the schema."""

OPENAI_STRICT_MAX_PROPERTIES = 5000
OPENAI_STRICT_MAX_DEPTH = 10
OPENAI_STRICT_MAX_ENUM_VALUES = 1000
OPENAI_DESCRIPTION_MAX = 1024

TOOL_COUNT_MAX: Mapping[str, int] = {
    # "A max of 128 functions are supported" (the Chat Completions reference of `tools`); the API
    # refuses more: "Invalid 'tools': array too long. Expected an array with maximum length 128"
    "openai": 128,
    # "The maximum number of function declarations that can be provided with the request is 128"
    # (Vertex AI's function calling reference; older SDK references said 64)
    "gemini": 128,
}
"""The most tools a target accepts in one request; Anthropic and MCP document no such limit."""


def active_targets(ctx: LintContext) -> tuple[str, ...]:
    """The chosen targets, each once, in the order given."""
    return tuple(dict.fromkeys(ctx.targets))


def join_targets(targets: Sequence[str]) -> str:
    """``openai``, ``openai and gemini``, ``openai, anthropic and gemini``."""
    if len(targets) < 2:
        return "".join(targets)
    return f"{', '.join(targets[:-1])} and {targets[-1]}"


def is_object_schema(schema: Mapping[str, Any]) -> bool:
    """True when *schema* describes an object: ``type: object`` (alone or in a list), or ``properties`` and no type."""
    declared = schema.get("type")
    if declared == "object" or (isinstance(declared, list) and "object" in declared):
        return True
    return declared is None and isinstance(schema.get("properties"), Mapping)


def under(path: tuple[str | int, ...], prefixes: set[tuple[str | int, ...]]) -> bool:
    """True when *path* lies at or below one of *prefixes*."""
    return any(path[:i] in prefixes for i in range(1, len(path) + 1))


def declares(spec_file: SpecFile, tool: ToolSpec, key: str) -> bool:
    """True when *tool*'s body in *spec_file* spells out *key* (rather than the model filling in a default)."""
    tools = spec_file.data.get("tools") if isinstance(spec_file.data, Mapping) else None
    body = tools.get(tool.name) if isinstance(tools, Mapping) else None
    return isinstance(body, Mapping) and key in body
