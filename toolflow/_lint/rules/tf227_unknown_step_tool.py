"""A pipeline step that calls a tool no spec file declares.

## What it does
Reports each `tool:` of a pipeline's step that names a tool declared in none of
the linted files, with the closest declared name.

Tools listed under an MCP server's `tools:` count as declared; a name that
may be a tool of a server importing all its tools is TF244's (a warning).

## Why is this bad?
The registry refuses to build with such a pipeline, so no tool of the project
can be called; the name is usually a typo or a tool that was renamed.

## Example
```yaml
tools:
  lookup_order:
    description: Look an order up
    implementation: lookup_order
  order_summary:
    description: Summarise an order
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order's id}
    pipeline:
      steps:
        order:
          tool: lookup_orders
          with: {order_id: "{{ order_id }}"}
```

## Use instead
```yaml
tools:
  lookup_order:
    description: Look an order up
    implementation: lookup_order
  order_summary:
    description: Summarise an order
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order's id}
    pipeline:
      steps:
        order:
          tool: lookup_order
          with: {order_id: "{{ order_id }}"}
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary
from toolflow._schemas import did_you_mean


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    for tool in summary.tools:
        if tool.pipeline is None:
            continue
        for step in tool.pipeline.steps:
            if summary.may_exist(step.tool):  # declared, or TF244's: it may be remote
                continue
            message = (
                f"step {step.name!r} of pipeline {tool.name!r} calls {step.tool!r}, which no spec file declares"
                f"{did_you_mean(step.tool, summary.declared_names)}"
            )
            yield RULE.diag_at(step.tool_place, message)


RULE = Rule(code="TF227", name="unknown-step-tool", severity=Severity.ERROR, doc=__doc__ or "", check_project=check)
