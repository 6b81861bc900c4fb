"""Facts about the JSON-Schema documents of tools (``parameters``, ``output_schema``) for the TF2xx rules.

Several rules look at every subschema of the same document; the walk is done
once per tool and field and kept while the tool lives. The walk never raises:
it follows only keywords whose values have the shape of subschemas, so that
``properties: [1]`` or a ``required`` that is a string is simply not followed.
Documents are walked as the loader builds them, plain dicts and lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from toolflow._lint._rule import ToolMemo
from toolflow._model import ToolSpec

__all__ = [
    "IN_PLACE",
    "REF_KEYWORDS",
    "Subschema",
    "dotted",
    "friendly_label",
    "has_remote_ref",
    "local_target",
    "refs",
    "resolves",
    "subschemas",
]

_SINGLE = frozenset(
    {
        "additionalProperties",
        "unevaluatedProperties",
        "items",
        "additionalItems",
        "unevaluatedItems",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
_MAPPED = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"})
_LISTED = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})

IN_PLACE = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "dependencies"})
"""Applicators whose subschemas apply to the same value as the schema that holds them."""

REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
"""Keywords that make a schema refer to another one."""

_MAX_DEPTH = 64

Path = tuple[str | int, ...]


@attrs.frozen(kw_only=True)
class Subschema:
    """One mapping subschema of a document.

    ``path`` is relative to the document. ``instance`` is the path of the
    subschema that describes the same value: the subschema itself, or the
    nearest ancestor reached without passing through an in-place applicator
    (``allOf``, ``if``, ...).
    """

    path: Path
    schema: Mapping[str, Any]
    instance: Path


def _walk(schema: dict[str, Any], path: Path, instance: Path, out: list[Subschema]) -> None:
    out.append(Subschema(path=path, schema=schema, instance=instance))
    if len(path) > _MAX_DEPTH:
        return
    for key, value in schema.items():
        if type(value) is dict:
            if key in _SINGLE:
                child: Path = (*path, key)
                _walk(value, child, instance if key in IN_PLACE else child, out)
            elif key in _MAPPED:
                for name, sub in value.items():
                    if type(sub) is dict:
                        child = (*path, key, name)
                        _walk(sub, child, instance if key in IN_PLACE else child, out)
        elif type(value) is list and key in _LISTED:
            for i, sub in enumerate(value):
                if type(sub) is dict:
                    child = (*path, key, i)
                    _walk(sub, child, instance if key in IN_PLACE else child, out)


@attrs.frozen
class _Facts:
    subschemas: tuple[Subschema, ...]
    refs: tuple[tuple[Subschema, str, object], ...]


_memo: ToolMemo[_Facts] = ToolMemo()


def _facts(tool: ToolSpec, field: str) -> _Facts:
    return _memo.get(tool, field, lambda: _collect(tool, field))


def _collect(tool: ToolSpec, field: str) -> _Facts:
    schema = getattr(tool, field)
    found: list[Subschema] = []
    # The loader builds plain dicts and lists; exact type checks keep the walk cheap.
    if type(schema) is dict:
        _walk(schema, (), (), found)
    return _Facts(
        subschemas=tuple(found),
        refs=tuple((s, kw, s.schema[kw]) for s in found for kw in REF_KEYWORDS if kw in s.schema),
    )


def subschemas(tool: ToolSpec, field: str = "parameters") -> tuple[Subschema, ...]:
    """Every mapping subschema of the tool's *field*, the document itself first (none when absent)."""
    return _facts(tool, field).subschemas


def refs(tool: ToolSpec, field: str = "parameters") -> tuple[tuple[Subschema, str, object], ...]:
    """Every reference keyword of the tool's *field*, as ``(subschema, keyword, value)``."""
    return _facts(tool, field).refs


def has_remote_ref(tool: ToolSpec, field: str = "parameters") -> bool:
    """True when the document refers outside itself (compiling it would try to fetch the resource)."""
    return any(not (isinstance(value, str) and value.startswith("#")) for _, _, value in refs(tool, field))


def local_target(ref: object) -> tuple[str, ...] | None:
    """The reference tokens of a local JSON-pointer reference (``#/$defs/x``), else ``None``."""
    if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
        return None
    if ref == "#":
        return ()
    return tuple(raw.replace("~1", "/").replace("~0", "~") for raw in ref[2:].split("/"))


def resolves(document: object, tokens: tuple[str, ...]) -> bool:
    """True when the reference *tokens* name a node of *document*."""
    node = document
    for token in tokens:
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return True


def dotted(field: str, path: Path) -> str:
    """Spell a place in a tool's schema for messages: ``parameters.properties.q.type``."""
    out = field
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def friendly_label(field: str, path: Path) -> str:
    """Name a subschema for messages: ``parameter 'filter.since'``, ``'parameters'``."""
    if not path:
        return repr(field)
    name = ""
    i = 0
    while i < len(path):
        part = path[i]
        if part == "properties" and i + 1 < len(path):
            name += f".{path[i + 1]}" if name else str(path[i + 1])
            i += 2
        elif part == "items" and name:
            name += "[]"
            i += 1
        elif part == "prefixItems" and name and i + 1 < len(path):
            name += f"[{path[i + 1]}]"
            i += 2
        else:
            return repr(dotted(field, path))
    return f"parameter {name!r}" if field == "parameters" else f"{field!r} property {name!r}"
