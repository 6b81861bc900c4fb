"""A pipeline step whose `with:` sets a parameter its tool binds to the caller's context.

## What it does
Reports each key of a step's `with:` that the step's tool names under `context:`.

## Why is this bad?
A bound parameter is filled from the caller's context (the user, the principal),
never from the arguments: a step is a call like the model's, and the call is
refused when its arguments set a bound parameter. The pipeline's steps get the
same context as the pipeline, so the step needs no value for it.

## Example
```yaml
tools:
  my_orders:
    description: The user's orders
    implementation: my_orders
    context: {user_id: user.id}
    parameters:
      type: object
      properties:
        user_id: {type: string, description: Whose orders}
  order_report:
    description: Report on the user's orders
    pipeline:
      steps:
        orders:
          tool: my_orders
          with: {user_id: "{{ who }}"}
```

## Use instead
```yaml
tools:
  my_orders:
    description: The user's orders
    implementation: my_orders
    context: {user_id: user.id}
    parameters:
      type: object
      properties:
        user_id: {type: string, description: Whose orders}
  order_report:
    description: Report on the user's orders
    pipeline:
      steps:
        orders:
          tool: my_orders
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    for step, target in summary.step_targets():
        for argument in step.arguments:
            if argument.name in target.bound:
                message = (
                    f"step {step.name!r} sets {argument.name!r}, which tool {target.name!r} takes from "
                    "the caller's context (its `context:`), not from arguments"
                )
                yield RULE.diag_at(argument.place, message)


RULE = Rule(
    code="TF255",
    name="step-sets-context-parameter",
    severity=Severity.ERROR,
    doc=__doc__ or "",
    check_project=check,
)
