"""A tool's schema uses `$ref`, or refers to itself.

## What it does
Reports each `$ref` (and `$dynamicRef`) in `parameters` and `output_schema`.
A reference that leads back to a schema containing it, directly or through
other references, is reported as recursive.

## Why is this bad?
Models read the schema as text: a reference sends them to another part of the
document, and a recursive one describes arguments of unbounded depth, which
they fill in poorly. Some providers reject references or recursion outright,
and others inline them and hit size limits.

## Example
```yaml
tools:
  place_order:
    parameters:
      type: object
      $defs:
        address:
          type: object
          properties:
            street:
              type: string
              description: Street and number
      properties:
        shipping:
          $ref: "#/$defs/address"
```

## Use instead
```yaml
tools:
  place_order:
    parameters:
      type: object
      properties:
        shipping:
          type: object
          description: Where to send the order
          properties:
            street:
              type: string
              description: Street and number
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._lint._schema_facts import local_target, refs
from toolflow._schemas import json_pointer

SCHEMA_FIELDS = ("parameters", "output_schema")


def _recursive(found: list[tuple[tuple[str, ...], tuple[str, ...] | None]]) -> list[bool]:
    """For each ``(location, target)`` reference, whether following references can lead back to it."""

    def inside(path: tuple[str, ...], target: tuple[str, ...]) -> bool:
        return path[: len(target)] == target

    # i -> j when reference j lies inside the schema that reference i points at.
    edges = [
        [j for j, (where, _) in enumerate(found) if target is not None and inside(where, target)] for _, target in found
    ]

    def returns(start: int) -> bool:
        seen: set[int] = set()
        stack = list(edges[start])
        while stack:
            node = stack.pop()
            if node == start:
                return True
            if node not in seen:
                seen.add(node)
                stack.extend(edges[node])
        return False

    return [returns(i) for i in range(len(found))]


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        for field in SCHEMA_FIELDS:
            found = refs(tool, field)
            if not found:
                continue
            locations = [(tuple(str(p) for p in sub.path), local_target(value)) for sub, _, value in found]
            for (sub, keyword, value), recursive in zip(found, _recursive(locations), strict=True):
                pointer = f"{tool.pointer}/{field}{json_pointer([*sub.path, keyword])}"
                if recursive:
                    message = (
                        f"recursive {keyword!r} to {value!r} in {field!r}; "
                        "models and some providers cannot use recursive schemas"
                    )
                else:
                    message = (
                        f"{keyword!r} to {value!r} in {field!r}; inline the definition, "
                        "models and some providers do not follow references"
                    )
                yield RULE.diag(tool, pointer, message, key=True)


RULE = Rule(code="TF206", name="schema-ref", severity=Severity.WARNING, doc=__doc__ or "", check=check)
