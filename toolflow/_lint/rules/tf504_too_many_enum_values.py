"""An `enum` with more than 10 values.

## What it does
Reports each `enum` in `parameters`, at any depth, that lists more than 10
values, at the `enum` key.

## Why is this bad?
A long list of choices is hard for the model to pick from: it confuses similar
values, and the list takes context on every turn. Seed 003 caps `enum` at 10
values "for clarity". Group the values into a coarser choice plus a second
parameter, or accept a free string and check it in the implementation.

## Example
```yaml
tools:
  set_channel:
    description: Switch the radio to a channel
    parameters:
      type: object
      properties:
        channel:
          type: string
          description: Channel to tune to
          enum: [c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12]
```

## Use instead
```yaml
tools:
  set_channel:
    description: Switch the radio to a channel
    parameters:
      type: object
      properties:
        channel:
          type: integer
          description: Channel number to tune to
          minimum: 1
          maximum: 12
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._lint._schema_facts import friendly_label, subschemas
from toolflow._schemas import json_pointer

MAX_ENUM_VALUES = 10


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        for sub in subschemas(tool, "parameters"):
            values = sub.schema.get("enum")
            if isinstance(values, list) and len(values) > MAX_ENUM_VALUES:
                message = (
                    f"'enum' of {friendly_label('parameters', sub.path)} in tool {tool.name!r} has {len(values)} "
                    f"values, more than {MAX_ENUM_VALUES}; group them, or take a free value and check it in the "
                    "implementation"
                )
                pointer = f"{tool.pointer}/parameters{json_pointer([*sub.path, 'enum'])}"
                yield RULE.diag(tool, pointer, message, key=True)


RULE = Rule(code="TF504", name="too-many-enum-values", severity=Severity.WARNING, doc=__doc__ or "", check=check)
