"""A pipeline step whose `with:` does not fit the parameters of the tool it calls.

## What it does
Reports each key of a step's `with:` that is not a parameter of the step's tool
(with the closest parameter), and each required parameter of that tool that
`with:` leaves out (one without a `default`). Checked only when the tool's
parameters are known: it declares `properties`, with no `patternProperties`
and no `additionalProperties` other than `false`.

## Why is this bad?
A step is a real call of its tool, with its validation: an unknown argument is
dropped (or, with `additionalProperties: false`, refused), so the value meant
for the tool never reaches it, and a missing required argument fails every call
of the pipeline.

## Example
```yaml
tools:
  lookup_order:
    description: Look an order up
    implementation: lookup_order
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order's id}
      required: [order_id]
  order_report:
    description: Report on an order
    parameters:
      type: object
      properties:
        id: {type: string, description: The order's id}
    pipeline:
      steps:
        order:
          tool: lookup_order
          with: {orderid: "{{ id }}"}
```

## Use instead
```yaml
tools:
  lookup_order:
    description: Look an order up
    implementation: lookup_order
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order's id}
      required: [order_id]
  order_report:
    description: Report on an order
    parameters:
      type: object
      properties:
        id: {type: string, description: The order's id}
    pipeline:
      steps:
        order:
          tool: lookup_order
          with: {order_id: "{{ id }}"}
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary
from toolflow._schemas import did_you_mean


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    for step, target in summary.step_targets():
        given = {argument.name for argument in step.arguments}
        if target.closed:
            for argument in step.arguments:
                if argument.name not in target.parameters:
                    message = (
                        f"step {step.name!r} passes {argument.name!r}, which is not a parameter of "
                        f"tool {target.name!r}{did_you_mean(argument.name, target.parameters)}"
                    )
                    yield RULE.diag_at(argument.place, message)
        # A parameter bound to the caller's context is filled from it (TF255 reports setting one).
        missing = [n for n in target.required if n not in given and n not in target.defaulted and n not in target.bound]
        if missing:
            listed = ", ".join(repr(n) for n in missing)
            noun = "parameter" if len(missing) == 1 else "parameters"
            message = f"step {step.name!r} leaves out the required {noun} {listed} of tool {target.name!r}"
            yield RULE.diag_at(step.arguments_place, message)


RULE = Rule(
    code="TF230", name="step-argument-mismatch", severity=Severity.ERROR, doc=__doc__ or "", check_project=check
)
