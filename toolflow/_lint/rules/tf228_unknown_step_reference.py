"""A pipeline template or `needs:` naming a step that is unknown, the step itself, or a later one.

## What it does
Reports each `steps.NAME` and `errors.NAME` read by a step's `with:`, `when:` or
`for_each:`, and each name of its `needs:`, that is not an earlier step of the
same pipeline: a step it does not have (with the closest name), the step itself,
or a step written after it. Reads in the pipeline's `result:` may name any of
its steps, but only its steps.

## Why is this bad?
Steps run in the order written, each once the steps it reads have finished: a
step cannot wait for itself or for a later step, and reading a step the
pipeline does not have fails every call. The registry refuses to build with
such a pipeline.

## Example
```yaml
tools:
  order_report:
    description: Report on an order
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order's id}
    pipeline:
      steps:
        customer:
          tool: lookup_customer
          with: {customer_id: "{{ steps.order.customer_id }}"}
        order:
          tool: lookup_order
          with: {order_id: "{{ order_id }}"}
      result: "{{ steps.custmer.name }}"
```

## Use instead
```yaml
tools:
  order_report:
    description: Report on an order
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order's id}
    pipeline:
      steps:
        order:
          tool: lookup_order
          with: {order_id: "{{ order_id }}"}
        customer:
          tool: lookup_customer
          with: {customer_id: "{{ steps.order.customer_id }}"}
      result: "{{ steps.customer.name }}"
```
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._model import Pipeline, ToolSpec
from toolflow._schemas import did_you_mean


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    if not any(tool.pipeline is not None for tool in ctx.tools):
        return
    # Imported here: Jinja2 is loaded only when some tool has a pipeline.
    from toolflow._lint._pipeline_facts import iter_pipelines  # noqa: PLC0415

    for text, tool, pipeline in iter_pipelines(ctx.files):
        yield from _pipeline(text, tool, pipeline)


def _pipeline(text: str, tool: ToolSpec, pipeline: Pipeline) -> Iterator[Diagnostic]:
    from toolflow._lint._pipeline_facts import moved, pipeline_strings, read_span  # noqa: PLC0415

    names = [step.name for step in pipeline.steps]
    position = {name: index for index, name in enumerate(names)}
    for string in pipeline_strings(tool):
        reported: set[str] = set()
        for read in string.reads:
            if read.step is None or read.step in reported:
                continue
            problem = _problem(string.step, f"reads {read.root}.{read.step}", read.step, names, position)
            if problem is None:
                continue
            reported.add(read.step)
            diagnostic = RULE.diag(tool, string.pointer, problem)
            yield moved(diagnostic, read_span(text, tool, string, read, 0))
    for step in pipeline.steps:
        for index, name in enumerate(step.needs):
            problem = _problem(step.name, f"needs {name!r}", name, names, position)
            if problem is not None:
                yield RULE.diag(tool, f"{step.pointer}/needs/{index}", problem)


def _problem(step: str | None, what: str, name: str, names: Sequence[str], position: dict[str, int]) -> str | None:
    """Why *step* (``None``: the result) may not read or need the step *name*; ``None`` when it may."""
    who = "the result" if step is None else f"step {step!r}"
    if name not in position:
        earlier = names if step is None else names[: position[step]]
        return f"{who} {what}, but the pipeline has no step {name!r}{did_you_mean(name, earlier)}"
    if step is None or position[name] < position[step]:
        return None
    if name == step:
        return f"{who} {what}, itself: a step cannot wait for its own result"
    return f"{who} {what}, which comes later: steps run in the order written, so move {name!r} before {step!r}"


RULE = Rule(code="TF228", name="unknown-step-reference", severity=Severity.ERROR, doc=__doc__ or "", check=check)
