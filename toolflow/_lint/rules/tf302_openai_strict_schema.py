"""Parameters that OpenAI's strict mode (`strict: true`) refuses.

## What it does
With `toolflow lint --target openai`, reports what keeps `parameters` from
being used with OpenAI function calling in strict mode (Structured Outputs):

- an object schema (the parameters themselves, a nested object, an object in
  `items` or `anyOf`) without `additionalProperties: false`, at the object, or
  with another value, at `additionalProperties`;
- a property that is not listed in its object's `required`, at the property;
- a keyword strict mode does not support, at the keyword: `allOf`, `not`,
  `if`/`then`/`else`, `dependentRequired`, `dependentSchemas`, `dependencies`,
  `oneOf`, `propertyNames`, `uniqueItems`, `unevaluatedProperties`,
  `unevaluatedItems`, `contains`, `minContains`, `maxContains`,
  `minProperties`, `maxProperties`.

Keywords OpenAI rejects at the top level even without strict mode are TF301's
and are not reported again here. The rule is a warning because strict mode is
opt-in; if you never send `strict: true`, ignore TF302.

## Why is this bad?
OpenAI's Structured Outputs guide ("Supported schemas") requires
`additionalProperties: false` in every object and every field in `required`
("to emulate an optional parameter, use a union type with null"), and lists
`allOf`, `not`, `dependentRequired`, `dependentSchemas`, `if`, `then`, `else`
as not supported. The API refuses such a tool with `Invalid schema for function
'...': In context=(...), 'additionalProperties' is required to be supplied and
to be false` (openai/openai-agents-python#1023), `'required' is required to be
supplied and to be an array including every key in properties. Missing 'id'`
(ash-project/ash_ai#155), or `'oneOf'` / `'propertyNames'` / `'uniqueItems'`
`is not permitted` (ai-dynamo/dynamo#15153, can1357/oh-my-pi#209,
1jehuang/jcode#687). A refused tool fails the whole request.

## Example
```yaml
# toolflow lint --target openai
tools:
  get_weather:
    description: Current weather at a place
    parameters:
      type: object
      properties:
        location:
          type: string
          description: City and country
        unit:
          type: string
          enum: [C, F]
          description: Temperature unit
      required: [location]
```

## Use instead
```yaml
tools:
  get_weather:
    description: Current weather at a place
    parameters:
      type: object
      properties:
        location:
          type: string
          description: City and country
        unit:
          type: [string, "null"]
          enum: [C, F, null]
          description: Temperature unit, or null for the local one
      required: [location, unit]
      additionalProperties: false
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._lint._schema_facts import friendly_label, subschemas
from toolflow._lint._target_facts import (
    OPENAI_STRICT_UNSUPPORTED,
    TOP_LEVEL_REJECTED,
    active_targets,
    declares,
    is_object_schema,
    under,
)
from toolflow._model import ToolSpec
from toolflow._schemas import json_pointer

Path = tuple[str | int, ...]


def _label(path: Path) -> str:
    return friendly_label("parameters", path)


def _yaml_word(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a schema"
    return repr(value)


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    if "openai" not in active_targets(ctx):
        return
    for spec_file in ctx.files:
        for tool in spec_file.tools:
            # Without declared parameters, the schema sent is the exporter's to make strict.
            if declares(spec_file, tool, "parameters"):
                yield from _check_tool(tool)


def _check_tool(tool: ToolSpec) -> Iterator[Diagnostic]:
    if not isinstance(tool.parameters, Mapping):
        return
    top_level_rejected = TOP_LEVEL_REJECTED["openai"]
    base = f"{tool.pointer}/parameters"
    # TF301 reports these as errors; what they hold is not looked at again.
    skipped: set[Path] = {(keyword,) for keyword in top_level_rejected if keyword in tool.parameters}
    for sub in subschemas(tool, "parameters"):
        if under(sub.path, skipped):
            continue
        schema = sub.schema
        for keyword in OPENAI_STRICT_UNSUPPORTED:
            if keyword not in schema:
                continue
            if (*sub.path, keyword) in skipped:
                continue
            skipped.add((*sub.path, keyword))
            message = (
                f"OpenAI strict mode does not support {keyword!r} (in {_label(sub.path)}); "
                "drop it and check the constraint in the tool's implementation"
            )
            yield RULE.diag(tool, f"{base}{json_pointer([*sub.path, keyword])}", message, key=True)
        if not is_object_schema(schema):
            continue
        if "additionalProperties" not in schema:
            message = (
                f"{_label(sub.path)} has no 'additionalProperties: false'; "
                "OpenAI strict mode requires it on every object"
            )
            yield RULE.diag(tool, f"{base}{json_pointer(sub.path)}", message, key=True)
        elif schema["additionalProperties"] is not False:
            message = (
                f"'additionalProperties' of {_label(sub.path)} must be false for OpenAI strict mode, not "
                f"{_yaml_word(schema['additionalProperties'])}: declare every accepted key in 'properties'"
            )
            yield RULE.diag(tool, f"{base}{json_pointer([*sub.path, 'additionalProperties'])}", message, key=True)
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            continue
        required = schema.get("required")
        listed = {n for n in required if isinstance(n, str)} if isinstance(required, list) else set()
        for name in properties:
            if name in listed:
                continue
            where = (*sub.path, "properties", name)
            message = (
                f"{_label(where)} is not in 'required'; OpenAI strict mode requires every "
                "property: list it, and allow null (e.g. type: [string, 'null']) if it is optional"
            )
            yield RULE.diag(tool, f"{base}{json_pointer(where)}", message, key=True)


RULE = Rule(code="TF302", name="openai-strict-schema", severity=Severity.WARNING, doc=__doc__ or "", check=check)
