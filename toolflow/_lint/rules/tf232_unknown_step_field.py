"""A pipeline template that reads a field its step's tool does not return.

## What it does
Follows each `steps.NAME.field...` read by a pipeline's templates through the
`output_schema` of step `NAME`'s tool, as far as the schema says: through
`properties` of objects that allow no other fields (no `additionalProperties`
other than `false`, no `patternProperties`) and the `items` of arrays. It
reports a field that such an object does not have (with the closest field), and
a field read from a value whose `type` is not an object. For a `for_each` step,
`steps.NAME` is the list of its results: an index (`steps.NAME[0]`) reads one
result. The walk stops at `$ref`, combinators (`allOf`, `anyOf`, `oneOf`, ...)
and objects that allow other fields.

## Why is this bad?
Templates render with strict undefined variables: reading a field the result
does not have fails the step that reads it, and with it the pipeline, at run
time.

## Example
```yaml
tools:
  lookup_order:
    description: Look an order up
    implementation: lookup_order
    output_schema:
      type: object
      properties:
        customer_id: {type: string}
  order_customer:
    description: The customer of an order
    pipeline:
      steps:
        order:
          tool: lookup_order
        customer:
          tool: lookup_customer
          with: {customer_id: "{{ steps.order.cusomer_id }}"}
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
        customer_id: {type: string}
  order_customer:
    description: The customer of an order
    pipeline:
      steps:
        order:
          tool: lookup_order
        customer:
          tool: lookup_customer
          with: {customer_id: "{{ steps.order.customer_id }}"}
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._shapes import follow, read_target, shown
from toolflow._lint._summary import FieldRead, PipelineSummary, ProjectSummary
from toolflow._schemas import did_you_mean


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    for tool in summary.tools:
        pipeline = tool.pipeline
        if pipeline is None:
            continue
        for step in pipeline.steps:
            for read in step.reads:
                yield from _read(summary, pipeline, read, f"step {step.name!r}")
        for read in pipeline.result_reads:
            yield from _read(summary, pipeline, read, "the result")


def _read(summary: ProjectSummary, pipeline: PipelineSummary, read: FieldRead, who: str) -> Iterator[Diagnostic]:
    target = read_target(summary, pipeline, read)
    if target is None:
        return
    step, tool, shape = target
    followed = follow(shape, read.path, repeated=step.repeated)
    if followed.wrong is None or followed.within is None:
        return
    part = read.path[followed.wrong]
    written = shown(read.step, read.path[: followed.wrong + 1])
    within = followed.within
    if within.properties is not None:
        hint = did_you_mean(str(part), sorted(within.properties))
        reason = f"the output_schema of tool {tool.name!r} has no field {part!r} there{hint}"
    else:
        reason = f"the output_schema of tool {tool.name!r} says that value is {' or '.join(within.types or ())}"
    yield RULE.diag_at(read.places[followed.wrong + 1], f"{who} reads {written}, but {reason}")


RULE = Rule(code="TF232", name="unknown-step-field", severity=Severity.ERROR, doc=__doc__ or "", check_project=check)
