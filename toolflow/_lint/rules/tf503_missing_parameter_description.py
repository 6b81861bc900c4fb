"""A parameter without a description.

## What it does
Reports each top-level property of `parameters` that has no `description`, or
an empty one, at the property's name.

## Why is this bad?
The model fills in arguments from the parameter's name, type and description.
A name alone rarely says what format, unit or range is expected, so the model
guesses, and the call fails validation or does the wrong thing. Seed 003's
tool definitions give every parameter a description "for the LLM".

## Example
```yaml
tools:
  set_timer:
    description: Start a countdown timer
    parameters:
      type: object
      properties:
        duration:
          type: integer
      required: [duration]
```

## Use instead
```yaml
tools:
  set_timer:
    description: Start a countdown timer
    parameters:
      type: object
      properties:
        duration:
          type: integer
          description: Length of the countdown in seconds
      required: [duration]
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._schemas import json_pointer


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        properties = tool.parameters.get("properties") if isinstance(tool.parameters, Mapping) else None
        if not isinstance(properties, Mapping):
            continue
        for name, schema in properties.items():
            if not isinstance(schema, Mapping):
                continue
            description = schema.get("description")
            if isinstance(description, str) and description.strip():
                continue
            message = f"parameter {name!r} of tool {tool.name!r} has no description; say what to pass and in what form"
            pointer = f"{tool.pointer}/parameters{json_pointer(['properties', name])}"
            yield RULE.diag(tool, pointer, message, key=True)


RULE = Rule(
    code="TF503", name="missing-parameter-description", severity=Severity.WARNING, doc=__doc__ or "", check=check
)
