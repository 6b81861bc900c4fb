"""A parameter-schema keyword that a `--target` provider rejects.

## What it does
With `toolflow lint --target openai|anthropic|gemini|mcp`, reports the schema
keywords in `parameters` that the chosen provider refuses, at the keyword,
naming the provider:

- openai: `oneOf`, `anyOf`, `allOf`, `enum`, `const` or `not` at the top level
  of `parameters`;
- anthropic: `oneOf`, `anyOf` or `allOf` at the top level of `parameters`;
- gemini: any keyword outside the OpenAPI subset Gemini's `Schema` has (`type`,
  `format`, `title`, `description`, `nullable`, `enum`, `items`, `minItems`,
  `maxItems`, `properties`, `required`, `minProperties`, `maxProperties`,
  `minLength`, `maxLength`, `pattern`, `example`, `anyOf`, `propertyOrdering`,
  `default`, `minimum`, `maximum`), anywhere in `parameters`; a list in `type`
  below the top level; and `enum` values that are not strings;
- mcp: nothing: an MCP `inputSchema` may be any JSON Schema object (TF205
  checks that it is `type: object`).

The rule is silent unless a target is chosen. OpenAI's stricter rules for
`strict: true` are TF302's.

## Why is this bad?
The provider refuses the whole request that lists the tool, so none of the
agent's tools can be called, and the error surfaces only at run time:

- OpenAI answers `Invalid schema for function '...': schema must have type
  'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'const'/'not' at the top
  level` (reported in langchain-ai/langchainjs#9804, nspady/google-calendar-mcp#39).
- Anthropic answers `tools.N.custom.input_schema: input_schema does not support
  oneOf, allOf, or anyOf at the top level` (anthropics/claude-code#5973,
  #27337).
- Gemini's `FunctionDeclaration.parameters` is "a select subset of an OpenAPI
  3.0 schema object" (Gemini and Vertex AI `Schema` reference; the field list
  of `Schema` in googleapis/js-genai); other keys fail with `Invalid JSON
  payload received. Unknown name "additionalProperties" ... Cannot find field`
  (`$schema`, `const`, `exclusiveMinimum`, `propertyNames` alike; ax-llm/ax#293,
  zed-industries/zed#44875), a list in `type` with `Proto field is not
  repeating, cannot start list` (zed-industries/zed#53919), and numbers in
  `enum` with `Invalid value at '...enum[0]' (TYPE_STRING)`
  (google-gemini/gemini-cli#2031). Gemini's newer `parametersJsonSchema` field
  accepts full JSON Schema; this rule checks the classic `parameters` field.

## Example
```yaml
# toolflow lint --target gemini
tools:
  set_volume:
    description: Set the speaker volume
    parameters:
      type: object
      properties:
        level:
          type: integer
          description: Volume from 0 to 10
          exclusiveMaximum: 11
      additionalProperties: false
```

## Use instead
```yaml
tools:
  set_volume:
    description: Set the speaker volume
    parameters:
      type: object
      properties:
        level:
          type: integer
          description: Volume from 0 to 10
          maximum: 10
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._lint._schema_facts import friendly_label, subschemas
from toolflow._lint._target_facts import GEMINI_KEYWORDS, TOP_LEVEL_REJECTED, active_targets, join_targets, under
from toolflow._model import ToolSpec
from toolflow._schemas import json_pointer

Path = tuple[str | int, ...]


def _label(path: Path) -> str:
    return friendly_label("parameters", path)


_TOP_LEVEL_HINTS = {
    "oneOf": "keep the top level one object of named parameters and move the alternatives into a parameter",
    "anyOf": "keep the top level one object of named parameters and move the alternatives into a parameter",
    "allOf": "merge the subschemas into the top-level 'properties' and 'required'",
}
_TOP_LEVEL_DEFAULT_HINT = "the top level must be an object of named parameters"

_GEMINI_HINTS = {
    "const": "use 'enum' with the one value",
    "oneOf": "use 'anyOf'",
    "allOf": "merge the subschemas into one",
    "exclusiveMinimum": "use 'minimum'",
    "exclusiveMaximum": "use 'maximum'",
    "examples": "use 'example' with one value",
    "$ref": "inline the referenced schema",
    "$defs": "inline the definitions where they are used",
    "definitions": "inline the definitions where they are used",
    "additionalProperties": "list the accepted keys under 'properties'",
    "patternProperties": "list the accepted keys under 'properties'",
}
_GEMINI_DEFAULT_HINT = "remove it; Gemini accepts only the OpenAPI subset of JSON Schema"


def _gemini_hint(keyword: str, value: object) -> str:
    if keyword == "additionalProperties" and value is False:
        return "remove it; Gemini's schema has no such field"
    return _GEMINI_HINTS.get(keyword, _GEMINI_DEFAULT_HINT)


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    targets = active_targets(ctx)
    if not targets:
        return
    gemini = "gemini" in targets
    for tool in ctx.tools:
        parameters = tool.parameters
        if not isinstance(parameters, Mapping):
            continue
        base = f"{tool.pointer}/parameters"
        for keyword in parameters:
            rejecting = [t for t in targets if keyword in TOP_LEVEL_REJECTED.get(t, ())]
            if gemini and keyword not in GEMINI_KEYWORDS:
                rejecting.append("gemini")
            if rejecting:
                hint = _TOP_LEVEL_HINTS.get(keyword, _TOP_LEVEL_DEFAULT_HINT)
                if rejecting == ["gemini"]:
                    hint = _gemini_hint(keyword, parameters[keyword])
                verb = "rejects" if len(rejecting) == 1 else "reject"
                message = f"{join_targets(rejecting)} {verb} {keyword!r} at the top level of 'parameters'; {hint}"
                yield RULE.diag(tool, f"{base}{json_pointer([keyword])}", message, key=True)
        if gemini:
            yield from _gemini_below_top(tool, base)


def _gemini_below_top(tool: ToolSpec, base: str) -> Iterator[Diagnostic]:
    reported: set[Path] = {(keyword,) for keyword in tool.parameters if keyword not in GEMINI_KEYWORDS}
    for sub in subschemas(tool, "parameters"):
        if not sub.path or under(sub.path, reported):
            continue
        for keyword, value in sub.schema.items():
            if keyword in GEMINI_KEYWORDS and keyword not in ("type", "enum"):
                continue
            pointer = f"{base}{json_pointer([*sub.path, keyword])}"
            if keyword not in GEMINI_KEYWORDS:
                reported.add((*sub.path, keyword))
                hint = _gemini_hint(keyword, value)
                yield RULE.diag(
                    tool,
                    pointer,
                    f"gemini rejects {keyword!r} in {_label(sub.path)}; {hint}",
                    key=True,
                )
            elif keyword == "type" and isinstance(value, list):
                message = (
                    f"gemini rejects a list of types in {_label(sub.path)}; "
                    "give one type, with 'nullable: true' for null, or use 'anyOf'"
                )
                yield RULE.diag(tool, pointer, message, key=True)
            elif keyword == "enum" and isinstance(value, list):
                bad = next((i for i, item in enumerate(value) if not isinstance(item, str)), None)
                if bad is not None:
                    message = (
                        f"gemini accepts only strings in 'enum', not {value[bad]!r} in {_label(sub.path)}; "
                        "quote the values, or use 'minimum' and 'maximum' for a range of numbers"
                    )
                    yield RULE.diag(tool, f"{pointer}/{bad}", message)


RULE = Rule(code="TF301", name="target-unsupported-keyword", severity=Severity.ERROR, doc=__doc__ or "", check=check)
