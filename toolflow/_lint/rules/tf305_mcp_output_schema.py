"""An `output_schema` that MCP cannot carry, because it does not describe an object.

## What it does
With `toolflow lint --target mcp`, reports an `output_schema` whose top level
is not `type: object`: at its `type` when that is another type or a list of
types (`[object, "null"]` too), at `output_schema` when it has no `type`.

The rest of what MCP clients accept is checked whatever the target: tool names
by TF201 (`^[a-zA-Z0-9_-]{1,64}$`, within MCP's 1 to 128 characters of
`A-Z a-z 0-9 _ - .`) and the `inputSchema`, which MCP also requires to be
`type: object`, by TF205.

## Why is this bad?
The MCP specification (2025-06-18 and 2025-11-25) declares a tool's
`outputSchema` as an object schema: `{type: "object", properties?,
required?}`, and `structuredContent` as a JSON object. A server that sent
another schema would break clients that check listings against the
specification's schema, so toolflow's MCP export (`toolflow schema --format
mcp`, `toolflow serve`) leaves such an `outputSchema` out: the tool is listed
without it, and clients receive its results as text, unchecked.

## Example
```yaml
# toolflow lint --target mcp
tools:
  list_rooms:
    description: The rooms of the map
    output_schema:
      type: array
      items: {type: string}
```

## Use instead
```yaml
tools:
  list_rooms:
    description: The rooms of the map
    output_schema:
      type: object
      properties:
        rooms:
          type: array
          items: {type: string}
      required: [rooms]
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._lint._target_facts import active_targets

_HINT = "toolflow serve lists the tool without it; return an object with the value as a property"


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    if "mcp" not in active_targets(ctx):
        return
    for tool in ctx.tools:
        schema = tool.output_schema
        if not isinstance(schema, Mapping):
            continue
        pointer = f"{tool.pointer}/output_schema"
        if "type" not in schema:
            message = f"'output_schema' has no 'type'; MCP requires 'type: object' in an outputSchema: {_HINT}"
            yield RULE.diag(tool, pointer, message, key=True)
        elif schema["type"] != "object":
            message = f"MCP requires 'type: object' in an outputSchema, got type {schema['type']!r}: {_HINT}"
            yield RULE.diag(tool, f"{pointer}/type", message)


RULE = Rule(code="TF305", name="mcp-output-schema", severity=Severity.WARNING, doc=__doc__ or "", check=check)
