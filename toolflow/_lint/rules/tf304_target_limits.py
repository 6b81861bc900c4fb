"""A tool over a size limit that a `--target` provider documents.

## What it does
With `toolflow lint --target openai`, reports tools over OpenAI's limits:

- a `description` longer than 1024 characters, at the description;
- in strict mode (Structured Outputs): more than 5000 object properties in
  `parameters` in total, or more than 1000 `enum` values in total (both at
  `parameters`), or objects nested more than 10 levels deep (at the first
  object too deep).

Anthropic, Gemini and MCP document no per-tool limit that toolflow checks;
for them the rule reports nothing.

## Why is this bad?
OpenAI refused function descriptions over 1024 characters with `Invalid
'tools[0].function.description': string too long. Expected a string with
maximum length 1024` (getsentry/sentry-mcp#106, OpenHands/OpenHands#7167);
reports from May 2025 (run-llama/llama_index#18784) say the limit was lifted
for newer models, so this is a warning, and a description that long is far
over the 200 characters TF502 recommends anyway. The Structured Outputs guide
("Objects have limitations on nesting and size") allows up to 5000 object
properties in total with up to 10 levels of nesting and up to 1000 enum values
in total (earlier versions: 100 properties, 5 levels, 500 enum values; see the
OpenAI community threads "Measuring Maximum Depth and Object Properties in
Structured Outputs" and "500 Enums Limitation in Structured Output"). A schema
over a limit is refused in strict mode.

## Example
```yaml
# toolflow lint --target openai
tools:
  lookup:
    description: >
      Look up a record. (... 1,500 characters of instructions, examples and
      caveats ...)
```

## Use instead
```yaml
tools:
  lookup:
    description: Look up a record by its id
    parameters:
      type: object
      properties:
        id:
          type: string
          description: The record id, as shown in search results
      required: [id]
      additionalProperties: false
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._lint._schema_facts import friendly_label, subschemas
from toolflow._lint._target_facts import (
    OPENAI_DESCRIPTION_MAX,
    OPENAI_STRICT_MAX_DEPTH,
    OPENAI_STRICT_MAX_ENUM_VALUES,
    OPENAI_STRICT_MAX_PROPERTIES,
    active_targets,
    is_object_schema,
)
from toolflow._model import ToolSpec
from toolflow._schemas import json_pointer

Path = tuple[str | int, ...]


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    if "openai" not in active_targets(ctx):
        return
    for tool in ctx.tools:
        if isinstance(tool.description, str) and len(tool.description) > OPENAI_DESCRIPTION_MAX:
            message = (
                f"description of tool {tool.name!r} is {len(tool.description)} characters; OpenAI has refused "
                f"tool descriptions over {OPENAI_DESCRIPTION_MAX}: move the details to the parameters' descriptions"
            )
            yield RULE.diag(tool, f"{tool.pointer}/description", message)
        yield from _strict_limits(tool)


def _strict_limits(tool: ToolSpec) -> Iterator[Diagnostic]:
    properties = enum_values = 0
    object_depth: dict[Path, int] = {}
    too_deep: tuple[Path, int] | None = None
    for sub in subschemas(tool, "parameters"):
        schema = sub.schema
        if isinstance(schema.get("properties"), Mapping):
            properties += len(schema["properties"])
        if isinstance(schema.get("enum"), list):
            enum_values += len(schema["enum"])
        if is_object_schema(schema):
            outer = max(
                (object_depth[sub.path[:i]] for i in range(len(sub.path)) if sub.path[:i] in object_depth), default=0
            )
            object_depth[sub.path] = outer + 1
            if too_deep is None and outer + 1 > OPENAI_STRICT_MAX_DEPTH:
                too_deep = (sub.path, outer + 1)
    base = f"{tool.pointer}/parameters"
    if properties > OPENAI_STRICT_MAX_PROPERTIES:
        message = (
            f"'parameters' has {properties} object properties in total; OpenAI strict mode allows at most "
            f"{OPENAI_STRICT_MAX_PROPERTIES}: split the tool"
        )
        yield RULE.diag(tool, base, message, key=True)
    if enum_values > OPENAI_STRICT_MAX_ENUM_VALUES:
        message = (
            f"'parameters' has {enum_values} enum values in total; OpenAI strict mode allows at most "
            f"{OPENAI_STRICT_MAX_ENUM_VALUES}: use free strings for the long lists"
        )
        yield RULE.diag(tool, base, message, key=True)
    if too_deep is not None:
        path, depth = too_deep
        message = (
            f"{friendly_label('parameters', path)} is an object nested {depth} levels deep; OpenAI strict mode "
            f"allows at most {OPENAI_STRICT_MAX_DEPTH}: flatten the structure"
        )
        yield RULE.diag(tool, f"{base}{json_pointer(path)}", message, key=True)


RULE = Rule(code="TF304", name="target-limits", severity=Severity.WARNING, doc=__doc__ or "", check=check)
