"""A tool's `parameters` schema is not `type: object`.

## What it does
Reports `parameters` whose top-level `type` is anything but `object`,
including a `type` that lists more than one type, and `parameters` that have
no `type` at all. A `type` that names no JSON Schema type (`dict`) is TF204's,
which says what it likely meant, and is not reported twice.

## Why is this bad?
A tool call's arguments are always a JSON object of named values. OpenAI,
Anthropic and Gemini require the parameter schema to say `type: object` at the
top level and reject the request otherwise; a model offered any other shape
cannot call the tool.

## Example
```yaml
tools:
  search:
    parameters:
      type: string
      description: What to look for
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

from collections.abc import Iterator, Mapping

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._schemas import JSON_TYPES


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        parameters = tool.parameters
        if not isinstance(parameters, Mapping):
            continue
        pointer = f"{tool.pointer}/parameters"
        if "type" not in parameters:
            yield RULE.diag(tool, pointer, "'parameters' has no 'type'; tool arguments need 'type: object'", key=True)
        elif _names_no_type(parameters["type"]):
            continue  # TF204 names the token, with what it likely meant
        elif parameters["type"] != "object":
            message = f"'parameters' must have 'type: object', got type {parameters['type']!r}"
            yield RULE.diag(tool, f"{pointer}/type", message)


def _names_no_type(value: object) -> bool:
    """Whether *value* is, or lists, a string that is no JSON Schema type (``dict``)."""
    names = value if isinstance(value, list) else [value]
    return any(isinstance(name, str) and name not in JSON_TYPES for name in names)


RULE = Rule(code="TF205", name="parameters-not-object", severity=Severity.ERROR, doc=__doc__ or "", check=check)
