"""A `required` name is not one of the declared properties.

## What it does
Reports each entry of a `required` list, at any level of `parameters` or
`output_schema`, that names a property the object schema does not declare.

The check applies to object schemas that have `properties` or say
`type: object`. A name counts as declared when `properties` of the schema, or
of a schema applied to the same value (`allOf`, `anyOf`, `oneOf`, `if`/`then`/
`else`, `dependentSchemas`, or the schema these sit in), lists it. A name is
also accepted when a `patternProperties` pattern matches it or when
`additionalProperties` is a (non-empty) schema, since those describe it. An
open object (no `additionalProperties`, or `true`) does not excuse the name:
the model would still be asked for a value it is told nothing about, and the
usual cause is a typo. Object schemas that use `$ref` are skipped, because
the referenced schema may declare the name.

## Why is this bad?
The model is told that the argument is required but not what it is, so it
guesses or leaves it out, and the call fails validation. With
`additionalProperties: false` no argument set can satisfy the schema at all.

## Example
```yaml
tools:
  search:
    parameters:
      type: object
      properties:
        query:
          type: string
          description: What to look for
      required: [qeury]
```

## Use instead
```yaml
tools:
  search:
    parameters:
      type: object
      properties:
        query:
          type: string
          description: What to look for
      required: [query]
```
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

import attrs

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._lint._schema_facts import REF_KEYWORDS, Subschema, friendly_label, subschemas
from toolflow._schemas import did_you_mean, json_pointer

SCHEMA_FIELDS = ("parameters", "output_schema")


@attrs.define
class _Declared:
    """What the schemas of one instance location declare about its properties."""

    names: set[str] = attrs.field(factory=set)
    patterns: list[str] = attrs.field(factory=list)
    open_schema: bool = False
    opaque: bool = False

    def add(self, schema: Mapping[str, object]) -> None:
        properties = schema.get("properties")
        if type(properties) is dict:
            self.names.update(str(name) for name in properties)
        patterns = schema.get("patternProperties")
        if type(patterns) is dict:
            self.patterns.extend(str(p) for p in patterns)
        additional = schema.get("additionalProperties")
        self.open_schema |= type(additional) is dict and bool(additional)
        self.opaque |= any(keyword in schema for keyword in REF_KEYWORDS)

    def describes(self, name: str) -> bool:
        if name in self.names or self.open_schema:
            return True
        for pattern in self.patterns:
            try:
                if re.search(pattern, name):
                    return True
            except re.error:
                return True  # an ECMA-262 pattern Python cannot read may well match
        return False


def _is_object_schema(schema: Mapping[str, object]) -> bool:
    kind = schema.get("type")
    return "properties" in schema or kind == "object" or (type(kind) is list and "object" in kind)


def _check_field(subs: tuple[Subschema, ...]) -> Iterator[tuple[Subschema, int, str, _Declared]]:
    needed = {s.instance for s in subs if type(s.schema.get("required")) is list}
    if not needed:
        return
    declared: dict[tuple[str | int, ...], _Declared] = {}
    for sub in subs:
        if sub.instance in needed:
            declared.setdefault(sub.instance, _Declared()).add(sub.schema)
    for sub in subs:
        required = sub.schema.get("required")
        if type(required) is not list or not _is_object_schema(sub.schema):
            continue
        here = declared[sub.instance]
        if here.opaque:
            continue
        for i, name in enumerate(required):
            if isinstance(name, str) and not here.describes(name):
                yield sub, i, name, here


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        for field in SCHEMA_FIELDS:
            for sub, i, name, here in _check_field(subschemas(tool, field)):
                where = friendly_label(field, sub.instance)
                hint = did_you_mean(name, sorted(here.names))
                message = f"{name!r} is required but not declared in the properties of {where}{hint}"
                pointer = f"{tool.pointer}/{field}{json_pointer([*sub.path, 'required', i])}"
                yield RULE.diag(tool, pointer, message)


RULE = Rule(code="TF207", name="required-not-in-properties", severity=Severity.ERROR, doc=__doc__ or "", check=check)
