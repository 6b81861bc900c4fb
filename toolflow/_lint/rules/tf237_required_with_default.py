"""A parameter that is both required and has a `default`.

## What it does
Reports a top-level parameter listed in `required` whose schema also has a
`default`.

## Why is this bad?
Defaults are filled in before the arguments are checked, so the default
always satisfies `required`: a call that leaves the parameter out is accepted
with the default, and `required` does nothing. Worse, the exports tell the
model the parameter is required, so it must invent a value that the spec
already has. Decide which one is meant.

## Example
```yaml
tools:
  search:
    parameters:
      type: object
      properties:
        limit:
          type: integer
          default: 10
          description: Most results to return
      required: [limit]
```

## Use instead
```yaml
tools:
  search:
    parameters:
      type: object
      properties:
        limit:
          type: integer
          default: 10
          description: Most results to return (10 when left out)
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._schemas import json_pointer


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        parameters = tool.parameters
        if not isinstance(parameters, Mapping):
            continue
        properties, required = parameters.get("properties"), parameters.get("required")
        if not isinstance(properties, Mapping) or not isinstance(required, list):
            continue
        for name in dict.fromkeys(n for n in required if isinstance(n, str)):
            schema = properties.get(name)
            if isinstance(schema, Mapping) and "default" in schema:
                message = (
                    f"parameter {name!r} is required and has a default, which is filled in before 'required' "
                    f"is checked, so 'required' never fails; remove {name!r} from 'required' (the default "
                    "applies when it is left out) or remove the default"
                )
                pointer = f"{tool.pointer}/parameters{json_pointer(['properties', name, 'default'])}"
                yield RULE.diag(tool, pointer, message, key=True)


RULE = Rule(code="TF237", name="required-with-default", severity=Severity.WARNING, doc=__doc__ or "", check=check)
