"""A pipeline template that reads a variable the pipeline does not give it.

## What it does
Reports each variable that a step's `with:`, `when:` or `for_each:`, or the
pipeline's `result:`, reads but that is none of: a parameter of the pipeline,
`steps`, `errors`, a template global (`range`, `dict`, `lipsum`, `cycler`,
`joiner`, `namespace`) and, in the `with:` of a `for_each` step, that step's
item (`item`, or the name `as:` gives). Checked when the pipeline declares its
parameters' `properties`.

The item is only in its own step's `with:`: the step's `when:` and `for_each:`
are evaluated before there is an item, and other steps never see it. Pipelines
have no `env`: pass what a step needs as a parameter.

## Why is this bad?
Templates render with strict undefined variables: reading a name that is not
there fails the step, and with it the pipeline, at run time, typically after a
parameter was renamed or misspelt.

## Example
```yaml
tools:
  order_notes:
    description: Notes on each item of an order
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order's id}
    pipeline:
      steps:
        order:
          tool: lookup_order
          with: {order_id: "{{ orderid }}"}
        per_item:
          for_each: "{{ steps.order.items }}"
          as: line
          tool: item_notes
          with: {sku: "{{ item.sku }}"}
```

## Use instead
```yaml
tools:
  order_notes:
    description: Notes on each item of an order
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order's id}
    pipeline:
      steps:
        order:
          tool: lookup_order
          with: {order_id: "{{ order_id }}"}
        per_item:
          for_each: "{{ steps.order.items }}"
          as: line
          tool: item_notes
          with: {sku: "{{ line.sku }}"}
```
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._model import Pipeline, ToolSpec
from toolflow._schemas import did_you_mean

if TYPE_CHECKING:
    from toolflow._lint._pipeline_facts import PipelineString

_STEP_VARIABLES = frozenset({"steps", "errors"})


@functools.cache
def _globals() -> frozenset[str]:
    """The template globals a pipeline's templates see: ``env`` is a ``template:`` tool's, not a pipeline's."""
    from toolflow._templates import TEMPLATE_GLOBALS  # noqa: PLC0415 - Jinja2 only for a project with pipelines

    return TEMPLATE_GLOBALS - {"env"}


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    if not any(tool.pipeline is not None for tool in ctx.tools):
        return
    # Imported here: Jinja2 is loaded only when some tool has a pipeline.
    from toolflow._lint._pipeline_facts import iter_pipelines  # noqa: PLC0415

    for text, tool, pipeline in iter_pipelines(ctx.files):
        properties = tool.parameters.get("properties") if isinstance(tool.parameters, Mapping) else None
        if isinstance(properties, Mapping):
            yield from _pipeline(text, tool, pipeline, frozenset(str(name) for name in properties))


def _pipeline(text: str, tool: ToolSpec, pipeline: Pipeline, parameters: frozenset[str]) -> Iterator[Diagnostic]:
    from toolflow._lint._pipeline_facts import moved, name_span, pipeline_strings  # noqa: PLC0415

    items = {step.name: step.item_name for step in pipeline.steps if step.for_each is not None}
    for string in pipeline_strings(tool):
        allowed = parameters | _STEP_VARIABLES | _globals()
        item = items.get(string.step or "")
        if item is not None and string.key == "with":
            allowed |= {item}
        for name in sorted(string.variables - allowed):
            diagnostic = RULE.diag(tool, string.pointer, _message(tool.name, string, name, items, allowed))
            yield moved(diagnostic, name_span(text, tool, string, name))


def _message(
    pipeline: str, string: PipelineString, name: str, items: Mapping[str, str], allowed: frozenset[str]
) -> str:
    step, key = string.step, string.key
    where = "the result" if step is None else f"the '{key}' of step {step!r}"
    if name == "env":
        return f"{where} reads 'env', but pipelines have no environment; pass the value as a parameter"
    owners = sorted(owner for owner, item in items.items() if item == name)
    if step in owners:
        return f"{where} reads the item {name!r}, which only the step's 'with' sees (it is evaluated before the items)"
    if owners:
        return f"{where} reads {name!r}, the item of step {owners[0]!r}, which only that step's 'with' sees"
    own = items.get(step or "")
    if name == "item" and own is not None and key == "with":
        return f"{where} reads 'item', but its 'as' names the item {own!r}"
    choices = sorted(allowed - _globals())
    return f"{where} reads {name!r}, which is not a parameter of pipeline {pipeline!r}{did_you_mean(name, choices)}"


RULE = Rule(code="TF231", name="undeclared-pipeline-variable", severity=Severity.ERROR, doc=__doc__ or "", check=check)
