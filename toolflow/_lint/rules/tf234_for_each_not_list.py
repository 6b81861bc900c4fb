"""A `for_each` over a step's field that its tool's `output_schema` says is not a list.

## What it does
Reports a `for_each:` that is exactly one `{{ steps.NAME.field... }}` when the
`output_schema` of step `NAME`'s tool gives that value a `type` without
`array`. It follows the schema as TF232 does; `steps.NAME` of a `for_each`
step is itself a list.

## Why is this bad?
`for_each` must give a list: anything else fails the step, and with it the
pipeline, on every call.

## Example
```yaml
tools:
  lookup_order:
    description: Look an order up
    implementation: lookup_order
    output_schema:
      type: object
      properties:
        item_count: {type: integer}
        items: {type: array, items: {type: object}}
  order_notes:
    description: Notes on each item of an order
    pipeline:
      steps:
        order:
          tool: lookup_order
        notes:
          for_each: "{{ steps.order.item_count }}"
          tool: item_notes
```

## Use instead
```yaml
tools:
  lookup_order:
    description: Look an order up
    implementation: lookup_order
    output_schema:
      type: object
      properties:
        item_count: {type: integer}
        items: {type: array, items: {type: object}}
  order_notes:
    description: Notes on each item of an order
    pipeline:
      steps:
        order:
          tool: lookup_order
        notes:
          for_each: "{{ steps.order.items }}"
          tool: item_notes
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._shapes import follow, read_target, shown
from toolflow._lint._summary import ProjectSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    for tool in summary.tools:
        pipeline = tool.pipeline
        if pipeline is None:
            continue
        for step in pipeline.steps:
            read = step.for_each
            if read is None:
                continue
            target = read_target(summary, pipeline, read)
            if target is None:
                continue
            read_step, called, shape = target
            types = follow(shape, read.path, repeated=read_step.repeated).shape
            if types is None or not types.types or "array" in types.types:
                continue
            message = (
                f"step {step.name!r} runs for each of {shown(read.step, read.path)}, which the output_schema "
                f"of tool {called.name!r} says is {' or '.join(types.types)}, not a list"
            )
            yield RULE.diag_at(read.places[-1], message)


RULE = Rule(code="TF234", name="for-each-not-list", severity=Severity.ERROR, doc=__doc__ or "", check_project=check)
