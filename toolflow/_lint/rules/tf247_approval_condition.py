"""A tool's `approval:` condition that cannot be decided for every call.

## What it does
Checks a tool's `approval:` template (`approval: "{{ amount > 100 }}"`): it must
compile, read only the tool's parameters (when it declares their `properties`)
and the template globals, and read a parameter that is not `required` and has
no `default` only under an `is defined` guard (as TF236 checks other templates).

## Why is this bad?
The condition is evaluated per call with the call's arguments. One that does
not compile, or that reads a name the call does not give, fails; the call is
then refused (it never runs unasked), so the tool fails every call, or every
call that leaves an optional parameter out, until the spec is fixed.

## Example
```yaml
tools:
  refund_order:
    description: Refund an order
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order}
        amount: {type: number, description: How much to refund}
      required: [order_id]
    approval: "{{ ammount > 100 }}"
    implementation: refund_order
```

## Use instead
```yaml
tools:
  refund_order:
    description: Refund an order
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order}
        amount: {type: number, description: How much to refund}
      required: [order_id]
    approval: "{{ amount is defined and amount > 100 }}"
    implementation: refund_order
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._model import ToolSpec


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        if isinstance(tool.approval, str):
            yield from _condition(tool, tool.approval)


def _condition(tool: ToolSpec, source: str) -> Iterator[Diagnostic]:
    # Imported here: Jinja2 is loaded only when some tool has an approval condition.
    from toolflow._lint.rules.tf236_unguarded_optional_parameter import (  # noqa: PLC0415
        _implied,
        _message,
        _optional_without_default,
    )
    from toolflow._schemas import did_you_mean  # noqa: PLC0415
    from toolflow._template_guards import unguarded_template_reads  # noqa: PLC0415
    from toolflow._template_values import compile_value, references  # noqa: PLC0415
    from toolflow._templates import TEMPLATE_GLOBALS  # noqa: PLC0415

    pointer = f"{tool.pointer}/approval"
    compiled = compile_value(source)
    if isinstance(compiled, tuple):
        message = f"the approval condition of {tool.name!r} does not compile: {compiled[1].message}"
        yield RULE.diag(tool, pointer, message)
        return
    variables = references(source)[0]
    properties = tool.parameters.get("properties") if isinstance(tool.parameters, Mapping) else None
    if isinstance(properties, Mapping):
        parameters = sorted(str(name) for name in properties)
        for name in sorted(variables - set(parameters) - TEMPLATE_GLOBALS):
            message = (
                f"the approval condition of {tool.name!r} reads {name!r}, which is not one of its parameters "
                f"(the condition sees only the call's arguments){did_you_mean(name, parameters)}"
            )
            yield RULE.diag(tool, pointer, message)
    optional = _optional_without_default(tool) & variables
    for name, _ in unguarded_template_reads(source, optional, _implied(tool)) if optional else ():
        yield RULE.diag(tool, pointer, _message(f"the approval condition of {tool.name!r}", name))


RULE = Rule(code="TF247", name="approval-condition", severity=Severity.ERROR, doc=__doc__ or "", check=check)
