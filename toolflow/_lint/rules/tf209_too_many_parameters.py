"""A tool has more than 10 parameters.

## What it does
Reports `parameters` whose top-level `properties` declare more than 10
parameters.

## Why is this bad?
The more arguments a tool has, the less reliably models pick the right ones
and fill them in: they leave out required ones, invent values for optional
ones, and confuse similar names. Ten is the limit seed 003 sets for tools
models understand well.

## Example
```yaml
tools:
  search:
    parameters:
      type: object
      properties:
        query: {type: string, description: What to look for}
        title: {type: string, description: Words in the title}
        author: {type: string, description: Who wrote it}
        # ... nine more filters
```

## Use instead
```yaml
tools:
  search:
    parameters:
      type: object
      properties:
        query: {type: string, description: What to look for}
        filters:
          type: object
          description: Narrow the results by title, author, date, ...
  # or split it into tools that each do one thing
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule

MAX_PARAMETERS = 10


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        properties = tool.parameters.get("properties") if isinstance(tool.parameters, Mapping) else None
        if isinstance(properties, Mapping) and len(properties) > MAX_PARAMETERS:
            message = (
                f"tool {tool.name!r} has {len(properties)} parameters, more than {MAX_PARAMETERS}; "
                "models fill in long parameter lists poorly"
            )
            yield RULE.diag(tool, f"{tool.pointer}/parameters/properties", message, key=True)


RULE = Rule(code="TF209", name="too-many-parameters", severity=Severity.WARNING, doc=__doc__ or "", check=check)
