"""Tool definitions for models and clients: OpenAI, Anthropic and MCP formats.

Each exporter turns one :class:`~toolflow.ToolSpec` into a fresh JSON-ready
``dict`` (nothing in it is shared with the spec, so callers may change it):

- ``openai``: ``{"type": "function", "function": {"name", "description",
  "parameters", "strict"}}``, the Chat Completions ``tools`` entry. ``strict``
  is always written, because its default differs between OpenAI's APIs (Chat
  Completions treats a missing ``strict`` as false, the Responses API as true
  and then rewrites the schema). It is ``true`` exactly when the parameters
  already qualify for strict mode: every object has ``additionalProperties:
  false`` and lists every property in ``required``, and no keyword strict mode
  refuses is used (the facts of lint rule TF302); otherwise ``false``.
- ``anthropic``: ``{"name", "description", "input_schema"}``.
- ``gemini``: a Gemini ``FunctionDeclaration`` ``{"name", "description", "parameters"}``
  (https://ai.google.dev/api/caching#FunctionDeclaration), ``parameters`` rewritten into the
  OpenAPI 3.0 subset of Gemini's ``Schema`` by :func:`gemini_schema`; a tool without
  parameters has no ``parameters`` (Gemini refuses an object with empty ``properties``).

Parameter rules are enforced when a call runs; the exports tell the model them too, in the form
each target takes: OpenAI and Anthropic refuse the rules' keywords at the top level of a
schema (``allOf``, ``anyOf``, ``oneOf``, ``not``; strict mode refuses more), and Gemini's schema
has no ``allOf``, ``oneOf`` or ``not`` at all, so their
``description`` ends with a sentence (``Parameter rules: give exactly one of `name` or
`dbref`.``); MCP's ``inputSchema`` holds them as JSON Schema under ``allOf``, the validator's own
fragments. The text and fallback history formats describe tools with the sentence too.
- ``mcp``: an MCP ``Tool``: ``{"name", "title"?, "description", "inputSchema",
  "outputSchema"?, "annotations"}``. ``title`` (also ``annotations.title``)
  appears when the spec has one; ``outputSchema`` when the spec's
  ``output_schema`` describes an object, since MCP (2025-06-18 and 2025-11-25)
  requires ``type: object`` there.

Nothing exported carries a value from the environment: a string the loader interpolated from
``${...}`` (in the description, the title, or anywhere in ``parameters`` or ``output_schema``:
a ``default``, ``examples``, an ``enum`` or ``const``) is written as the spec writes it, with
its ``${...}`` reference (``toolflow._provenance.masked``). What a tool needs at run time from
the environment belongs in its implementation's configuration.

A tool that declares no parameters (``{"type": "object"}``) is exported with
``{"type": "object", "properties": {}, "additionalProperties": false}``:
OpenAI refuses an object schema without ``properties``, and the closed form
qualifies for strict mode.

MCP annotations follow from the category and implementation kind (the hints'
own defaults, when a hint is left out, are the pessimistic readOnly false,
destructive true, idempotent false, openWorld true, so every hint is written):

============== ============ =============== ================== =================
category       readOnlyHint destructiveHint idempotentHint     openWorldHint
============== ============ =============== ================== =================
safe_chain     true         false           true               by kind
terminal       false        false           spec ``idempotent`` by kind
dangerous      false        true            spec ``idempotent`` by kind
async_required false        false           spec ``idempotent`` true
other          false        true            spec ``idempotent`` by kind
============== ============ =============== ================== =================

"By kind": ``false`` for ``template`` and for ``implementation`` (a Python
callable bound by a plugin), ``true`` for ``command`` and for every kind a
plugin adds (``http`` and the like reach beyond the process). A read-only call
changes nothing, so it is idempotent. A category a policy declares is unknown
to the exporter and keeps the pessimistic destructive hint.

A ``pipeline`` tool does nothing but call its steps, so its hints come from its
steps' tools (through nested pipelines), whatever its own category: read-only
only if every step is, destructive if any step is, idempotent only if every step
is, open-world if any step is. A step whose tool is not among the tools given
counts as the worst case (MCP's defaults).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple, get_args

from toolflow._errors import UsageError
from toolflow._lint._target_facts import (
    GEMINI_KEYWORDS,
    OPENAI_STRICT_MAX_DEPTH,
    OPENAI_STRICT_MAX_ENUM_VALUES,
    OPENAI_STRICT_MAX_PROPERTIES,
    OPENAI_STRICT_UNSUPPORTED,
    TOP_LEVEL_REJECTED,
    is_object_schema,
)
from toolflow._model import Category, ParameterRule, ToolSpec
from toolflow._provenance import masked
from toolflow._schemas import did_you_mean, validation_schema

__all__ = [
    "EXPORT_FORMATS",
    "ExportFormat",
    "anthropic_tool",
    "description",
    "export_tools",
    "gemini_schema",
    "gemini_tool",
    "input_schema",
    "mcp_annotations",
    "mcp_tool",
    "openai_strict_compatible",
    "openai_tool",
]

ExportFormat = Literal["openai", "anthropic", "mcp", "gemini"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = get_args(ExportFormat)
"""The formats :func:`export_tools` and ``toolflow schema --format`` accept."""

CLOSED_WORLD_KINDS = frozenset({"implementation", "template"})
"""Implementation kinds exported with ``openWorldHint: false`` (unless the category is async_required)."""

_NO_PARAMETERS: Mapping[str, Any] = {"type": "object"}


def input_schema(spec: ToolSpec) -> dict[str, Any]:
    """A copy of the tool's parameter schema as it is sent to models and clients (strings from ``${...}`` masked).

    The parameters the tool binds to the caller's context (``context:``) are left out of
    ``properties`` and ``required``: the engine fills them, never the model. Every export (and
    the text and fallback formats' descriptions) reads the parameters here.
    """
    if spec.parameters == _NO_PARAMETERS:
        return {"type": "object", "properties": {}, "additionalProperties": False}
    schema: dict[str, Any] = masked(spec.parameters)
    if spec.context:
        _unbind(schema, spec.context)
    return schema


def _unbind(schema: dict[str, Any], bound: Mapping[str, str]) -> None:
    """Take the *bound* parameters out of *schema*'s ``properties`` and ``required`` (in place: it is a copy)."""
    properties = schema.get("properties")
    if isinstance(properties, dict):
        schema["properties"] = {name: sub for name, sub in properties.items() if name not in bound}
    required = schema.get("required")
    if isinstance(required, list):
        kept = [name for name in required if name not in bound]
        if kept:
            schema["required"] = kept
        else:
            del schema["required"]


def description(spec: ToolSpec) -> str:
    """The tool's description as it is sent to models and clients (a string from ``${...}`` masked)."""
    text: str = masked(spec.description)
    return text


def model_rules(spec: ToolSpec) -> tuple[ParameterRule, ...]:
    """The tool's parameter rules as models and clients are shown them: those about bound parameters are left out.

    A rule naming a parameter the tool binds to the caller's context (in ``params``, ``when`` or
    ``when_values``) is about a value the model never gives; the engine still checks it after
    filling the context.
    """
    if not spec.context:
        return spec.parameter_rules
    bound = spec.context.keys()
    return tuple(
        rule
        for rule in spec.parameter_rules
        if bound.isdisjoint(rule.params) and rule.when not in bound and bound.isdisjoint(rule.when_values or ())
    )


def mcp_input_schema(spec: ToolSpec) -> dict[str, Any]:
    """The parameter schema with the parameter rules as JSON Schema under ``allOf`` (MCP takes any JSON Schema)."""
    rules = model_rules(spec)
    if not rules:
        return input_schema(spec)
    schema: dict[str, Any] = masked(validation_schema(input_schema(spec), rules))
    return schema


def described_with_rules(spec: ToolSpec) -> str:
    """The tool's description, followed by its parameter rules as a sentence (where a schema cannot hold them).

    ``Parameter rules: give exactly one of `name` or `dbref`; if `mode` is "full", also give `depth`.``
    """
    text = description(spec)
    sentences = rule_sentences(model_rules(spec))
    if not sentences:
        return text
    rules = f"Parameter rules: {'; '.join(sentences)}."
    return f"{text}\n\n{rules}" if text else rules


def rule_sentences(rules: Sequence[ParameterRule]) -> list[str]:
    """Each parameter rule as words a model reads (values from ``${...}`` masked)."""
    sentences = []
    for rule in rules:
        names = [f"`{masked(name)}`" for name in dict.fromkeys(rule.params)]
        listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {_joiner(rule.kind)} {names[-1]}"
        if rule.kind == "requires":
            if rule.when_values is not None:
                condition = " and ".join(
                    f"`{masked(key)}` is {json.dumps(masked(value), ensure_ascii=False, default=str)}"
                    for key, value in rule.when_values.items()
                )
            else:
                condition = f"`{masked(rule.when)}` is given"
            sentences.append(f"if {condition}, also give {listed}")
        else:
            sentences.append(f"give {_QUANTITY[rule.kind]} {listed}")
    return sentences


_QUANTITY = {"exclusive": "at most one of", "at_least_one": "at least one of", "exactly_one": "exactly one of"}


def _joiner(kind: str) -> str:
    return "and" if kind in {"requires", "at_least_one"} else "or"


def openai_tool(spec: ToolSpec) -> dict[str, Any]:
    """The OpenAI (Chat Completions) ``tools`` entry of *spec*; parameter rules in the description."""
    parameters = input_schema(spec)
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": described_with_rules(spec),
            "parameters": parameters,
            "strict": openai_strict_compatible(parameters),
        },
    }


def anthropic_tool(spec: ToolSpec) -> dict[str, Any]:
    """The Anthropic Messages API ``tools`` entry of *spec*; parameter rules in the description."""
    return {"name": spec.name, "description": described_with_rules(spec), "input_schema": input_schema(spec)}


def gemini_tool(spec: ToolSpec) -> dict[str, Any]:
    """The Gemini ``FunctionDeclaration`` of *spec*; parameter rules in the description."""
    declaration: dict[str, Any] = {"name": spec.name, "description": described_with_rules(spec)}
    parameters = gemini_schema(input_schema(spec))
    if parameters.get("properties"):
        declaration["parameters"] = parameters
    return declaration


def gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """*schema* (JSON Schema) rewritten into the OpenAPI 3.0 subset that Gemini's ``Schema`` takes.

    Local ``$ref`` (``#/$defs/...``, ``#/definitions/...``) are inlined (a reference cycle or
    any other reference becomes ``{}``, any value); a list in ``type`` becomes one type with
    ``nullable: true`` for ``"null"``, or ``anyOf`` of the types; ``oneOf`` becomes ``anyOf``;
    ``const`` a one-value ``enum``; ``examples`` its first value as ``example``; an ``enum`` with
    a value that is not a string is dropped (Gemini's enums are strings), and so is a string's
    ``format`` other than ``date-time`` and ``enum`` (the API refuses ``email``, ``uri``, ...). Every other keyword
    outside :data:`GEMINI_KEYWORDS` is dropped (``additionalProperties``, ``allOf``, ``not``,
    ``exclusiveMinimum``, ``uniqueItems``, ...): the call is still validated against the
    tool's own schema when it runs.
    """
    return _gemini_subschema(schema, schema, ())


def _gemini_subschema(schema: object, root: Mapping[str, Any], refs: tuple[str, ...]) -> dict[str, Any]:
    """One (sub)schema for Gemini; *refs* are the references being inlined above it (to stop a cycle)."""
    if not isinstance(schema, Mapping):
        return {}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _local_definition(root, ref)
        return {} if target is None or ref in refs else _gemini_subschema(target, root, (*refs, ref))
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, Mapping):
            out[key] = {name: _gemini_subschema(sub, root, refs) for name, sub in value.items()}
        elif key == "items" and isinstance(value, Mapping):
            out[key] = _gemini_subschema(value, root, refs)
        elif key in ("anyOf", "oneOf") and isinstance(value, list):
            out["anyOf"] = [_gemini_subschema(sub, root, refs) for sub in value]
        else:
            out.update(_gemini_keyword(key, value, schema))
    return out


def _gemini_keyword(key: str, value: object, schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """What the keyword *key* of *schema* (not a keyword holding subschemas) becomes for Gemini."""
    rewrite = _GEMINI_REWRITES.get(key)
    if rewrite is not None:
        return rewrite(value, schema)
    return {key: value} if key in GEMINI_KEYWORDS else {}


def _strings_only(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _gemini_format(value: object, schema: Mapping[str, Any]) -> Mapping[str, Any]:
    # "only 'enum' and 'date-time' are supported for STRING type" (the API's answer to 'email', 'uri', ...)
    return {} if schema.get("type") == "string" and value not in ("enum", "date-time") else {"format": value}


_GEMINI_REWRITES: Mapping[str, Callable[[Any, Mapping[str, Any]], Mapping[str, Any]]] = {
    "type": lambda value, _: _gemini_types(value) if isinstance(value, list) else {"type": value},
    "const": lambda value, _: {"enum": [value]} if isinstance(value, str) else {},
    "examples": lambda value, schema: (
        {"example": value[0]} if isinstance(value, list) and value and "example" not in schema else {}
    ),
    "enum": lambda value, _: {"enum": value} if _strings_only(value) else {},
    "format": _gemini_format,
    # Subschema keywords of an unexpected shape (a list in "items", tuple validation) are dropped.
    "items": lambda _value, _schema: {},
    "properties": lambda _value, _schema: {},
    "anyOf": lambda _value, _schema: {},
    "oneOf": lambda _value, _schema: {},
}


def _gemini_types(types: list[object]) -> dict[str, Any]:
    """A JSON Schema list of types as Gemini writes it: one type (maybe ``nullable``), or ``anyOf``."""
    named = [t for t in types if isinstance(t, str) and t != "null"]
    out: dict[str, Any] = {"nullable": True} if "null" in types else {}
    if len(named) == 1:
        out["type"] = named[0]
    elif named:
        out["anyOf"] = [{"type": t} for t in named]
    return out


def _local_definition(root: Mapping[str, Any], ref: str) -> Mapping[str, Any] | None:
    """What the local reference *ref* (``#/$defs/name`` or ``#/definitions/name``) points at, if anything."""
    for prefix in ("#/$defs/", "#/definitions/"):
        if ref.startswith(prefix):
            definitions = root.get(prefix[2:-1])
            target = definitions.get(ref[len(prefix) :]) if isinstance(definitions, Mapping) else None
            return target if isinstance(target, Mapping) else None
    return None


def mcp_tool(
    spec: ToolSpec, tools: Mapping[str, ToolSpec] | None = None, *, task_support: bool = False
) -> dict[str, Any]:
    """The MCP ``Tool`` definition of *spec* (as listed by ``tools/list``); *tools* as for :func:`mcp_annotations`.

    *task_support* (a tool of a background category, served by ``toolflow serve``) adds
    ``execution.taskSupport: "optional"`` (MCP 2025-11-25): a client may call it as a task.
    """
    tool: dict[str, Any] = {"name": spec.name}
    if spec.title:
        tool["title"] = masked(spec.title)
    tool["description"] = description(spec)
    tool["inputSchema"] = mcp_input_schema(spec)
    output = spec.output_schema
    if isinstance(output, Mapping) and output.get("type") == "object":
        tool["outputSchema"] = masked(output)
    tool["annotations"] = mcp_annotations(spec, tools)
    if task_support:
        tool["execution"] = {"taskSupport": "optional"}
    return tool


def mcp_annotations(spec: ToolSpec, tools: Mapping[str, ToolSpec] | None = None) -> dict[str, Any]:
    """The MCP ``ToolAnnotations`` of *spec*, derived from its category and implementation kind.

    A pipeline's hints come from its steps' tools, looked up by name in *tools* (every tool its
    steps may call, through nested pipelines too): see :func:`_hints`.
    """
    annotations: dict[str, Any] = {}
    if spec.title:
        annotations["title"] = masked(spec.title)
    hints = _hints(spec, tools or {}, {})
    annotations["readOnlyHint"] = hints.read_only
    annotations["destructiveHint"] = hints.destructive
    annotations["idempotentHint"] = hints.idempotent
    annotations["openWorldHint"] = hints.open_world
    return annotations


class _Hints(NamedTuple):
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool


_UNKNOWN = _Hints(read_only=False, destructive=True, idempotent=False, open_world=True)
"""MCP's own defaults, the worst case: the hints of a step whose tool is unknown (or calls back into its pipeline)."""


def _own_hints(spec: ToolSpec) -> _Hints:
    """The hints of a tool that is not a pipeline: from its category and implementation kind."""
    category = spec.category
    read_only = category == Category.SAFE_CHAIN
    known = category in {c.value for c in Category}
    kind = spec.implementation.kind if spec.implementation else "implementation"
    return _Hints(
        read_only=read_only,
        destructive=category == Category.DANGEROUS or not known,
        idempotent=read_only or spec.idempotent,
        open_world=category == Category.ASYNC_REQUIRED or kind not in CLOSED_WORLD_KINDS,
    )


def _hints(spec: ToolSpec, tools: Mapping[str, ToolSpec], seen: dict[str, _Hints | None]) -> _Hints:
    """The hints of *spec*: from its category and kind, or for a pipeline from its steps' tools.

    A pipeline does nothing but call its steps, so its own category (which decides what the
    agent loop does after it) does not enter: it is read-only only if every step is, destructive
    if any step is, idempotent only if every step is, open-world if any step is. *seen* memoises
    each tool's hints (``None`` while a pipeline is being worked out, so a cycle, which the
    registry refuses anyway, gets the worst case instead of recursing forever).
    """
    pipeline = spec.pipeline
    if pipeline is None:
        return _own_hints(spec)
    if spec.name in seen:
        return seen[spec.name] or _UNKNOWN
    seen[spec.name] = None
    steps = [tools.get(step.tool) for step in pipeline.steps]
    each = [_UNKNOWN if step is None else _hints(step, tools, seen) for step in steps]
    hints = _Hints(
        read_only=all(h.read_only for h in each),
        destructive=any(h.destructive for h in each),
        idempotent=all(h.idempotent for h in each),
        open_world=any(h.open_world for h in each),
    )
    seen[spec.name] = hints
    return hints


_EXPORTERS: Mapping[str, Callable[[ToolSpec], dict[str, Any]]] = {
    "openai": openai_tool,
    "anthropic": anthropic_tool,
    "mcp": mcp_tool,
    "gemini": gemini_tool,
}


def _exporter(format: str) -> Callable[[ToolSpec], dict[str, Any]]:  # noqa: A002 - the CLI option's name
    exporter = _EXPORTERS.get(format)
    if exporter is None:
        msg = f"unknown export format {format!r}: use one of {', '.join(EXPORT_FORMATS)}"
        raise UsageError(msg + did_you_mean(format, EXPORT_FORMATS))
    return exporter


def export_tools(
    specs: Iterable[ToolSpec],
    format: str,  # noqa: A002
    *,
    tools: Mapping[str, ToolSpec] | None = None,
) -> list[dict[str, Any]]:
    """Export every tool of *specs*, in order, in *format*.

    *tools* (default: *specs* by name) are the tools pipelines' steps are looked up in, for
    their MCP annotations (:func:`mcp_annotations`); pass every tool when *specs* is a selection.

    Raises:
        UsageError: *format* is not one of :data:`EXPORT_FORMATS`.
    """
    exporter = _exporter(format)
    specs = tuple(specs)
    if format != "mcp":
        return [exporter(spec) for spec in specs]
    lookup = {spec.name: spec for spec in specs} if tools is None else tools
    return [mcp_tool(spec, lookup) for spec in specs]


def openai_strict_compatible(parameters: object) -> bool:
    """True when *parameters* can be sent to OpenAI with ``strict: true`` as they are."""
    if not isinstance(parameters, Mapping) or not is_object_schema(parameters):
        return False
    if any(keyword in parameters for keyword in TOP_LEVEL_REJECTED["openai"]):
        return False
    counts = {"properties": 0}
    return _strict_schema(parameters, 0, counts) and counts["properties"] <= OPENAI_STRICT_MAX_PROPERTIES


_SCHEMA_MAPS = ("properties", "$defs", "definitions")
_SCHEMA_LISTS = ("anyOf", "prefixItems")


def _strict_schema(schema: object, depth: int, counts: dict[str, int]) -> bool:
    """Check one (sub)schema and everything below it; *depth* counts the objects it is nested in."""
    if not isinstance(schema, Mapping):
        return False
    if "$ref" in schema or any(keyword in schema for keyword in OPENAI_STRICT_UNSUPPORTED):
        return False
    enum = schema.get("enum")
    if isinstance(enum, list) and len(enum) > OPENAI_STRICT_MAX_ENUM_VALUES:
        return False
    if is_object_schema(schema):
        depth += 1
        if not _strict_object(schema, depth, counts):
            return False
    children = _subschemas(schema)
    return children is not None and all(_strict_schema(child, depth, counts) for child in children)


def _strict_object(schema: Mapping[str, Any], depth: int, counts: dict[str, int]) -> bool:
    """An object schema strict mode accepts at *depth*: closed, every property required; counts its properties."""
    if depth > OPENAI_STRICT_MAX_DEPTH or schema.get("additionalProperties") is not False:
        return False
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return False
    if not set(properties) <= set(required):
        return False
    counts["properties"] += len(properties)
    return True


def _subschemas(schema: Mapping[str, Any]) -> list[object] | None:
    """The schemas directly below *schema*; None when one of its schema maps or lists is not one."""
    children: list[object] = []
    for key in _SCHEMA_MAPS:
        value = schema.get(key)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            return None
        children.extend(value.values())
    for key in _SCHEMA_LISTS:
        value = schema.get(key)
        if value is None:
            continue
        if not isinstance(value, list):
            return None
        children.extend(value)
    if "items" in schema:
        children.append(schema["items"])
    return children
