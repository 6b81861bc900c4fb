"""An example's arguments or result do not match the tool's schemas.

## What it does
Validates each entry of `examples` the way a real call would be validated:
its `args` against `parameters` together with the tool's `parameter_rules`,
and its `result`, when given, against `output_schema`, when declared. Reports
one problem per example, at the failing argument when one can be named.

## Why is this bad?
Examples document how to call the tool and are shown to models and readers
as correct usage. An example that fails validation teaches a call that is
rejected, and usually means the schema and the examples drifted apart.

## Example
```yaml
tools:
  search:
    parameters:
      type: object
      properties:
        query:
          type: string
          description: What to look for
        limit:
          type: integer
          description: Most results to return
      required: [query]
    examples:
      - args: {query: lamps, limit: "5"}
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
        limit:
          type: integer
          description: Most results to return
      required: [query]
    examples:
      - args: {query: lamps, limit: 5}
```
"""  # noqa: D214, D405, D411 - `examples:` here is YAML, not a docstring section

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._lint._schema_facts import has_remote_ref
from toolflow._model import Example, ParameterRule, ToolSpec
from toolflow._schemas import (
    compile_parameter_rules,
    fast_validator,
    iter_instance_errors,
    json_pointer,
)


def _names(names: tuple[str, ...]) -> str:
    return ", ".join(repr(n) for n in names)


def describe_rule(rule: ParameterRule) -> str:
    """Say what a parameter rule demands, in words."""
    if rule.kind == "requires":
        if rule.when_values is not None:
            condition = " and ".join(f"{k!r} is {v!r}" for k, v in rule.when_values.items())
        else:
            condition = f"{rule.when!r} is given"
        return f"when {condition}, {_names(rule.params)} must be given"
    if rule.kind == "exclusive":
        return f"at most one of {_names(rule.params)} may be given"
    if rule.kind == "at_least_one":
        return f"at least one of {_names(rule.params)} must be given"
    return f"exactly one of {_names(rule.params)} must be given"


def _compiled(schema: dict[str, Any]) -> Any:
    try:
        return fast_validator(schema)
    except Exception:  # noqa: BLE001 - a schema that does not compile is TF204's to report
        return None


def _broken_rule(tool: ToolSpec, args: object) -> ParameterRule | None:
    for rule in tool.parameter_rules:
        validator = _compiled({"allOf": compile_parameter_rules([rule])})
        if validator is not None and not validator.is_valid(args):
            return rule
    return None


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        if not tool.examples:
            continue
        yield from _check_args(ctx, tool)
        yield from _check_results(ctx, tool)


def _check_args(ctx: LintContext, tool: ToolSpec) -> Iterator[Diagnostic]:
    if not ctx.schema_ok(tool) or has_remote_ref(tool):
        return
    plain = ctx.validator(tool)
    if plain is None:
        return
    # Arguments valid against the parameters and against the rules' fragments are valid against
    # validation_schema(parameters, rules), the schema calls are checked with (an
    # unevaluatedProperties in the parameters aside). Checking the two apart reuses the shared
    # validator and compiles only the small fragments, not the parameters a second time.
    fragments = compile_parameter_rules(tool.parameter_rules)
    rules = _compiled({"allOf": fragments}) if fragments else None
    for i, example in enumerate(tool.examples):
        if not plain.is_valid(example.args):
            message, path = next(iter_instance_errors(tool.parameters, example.args), ("it is not valid", []))
            yield _at(tool, example, "args", path, f"examples[{i}] args do not match the parameters: {message}")
        elif rules is not None and not rules.is_valid(example.args):
            rule = _broken_rule(tool, example.args)
            why = describe_rule(rule) if rule is not None else "the arguments break a parameter rule"
            yield _at(tool, example, "args", [], f"examples[{i}] args break a parameter rule: {why}")


def _check_results(ctx: LintContext, tool: ToolSpec) -> Iterator[Diagnostic]:
    schema = tool.output_schema
    if schema is None or not ctx.schema_ok(tool, "output_schema") or has_remote_ref(tool, "output_schema"):
        return
    validator = ctx.validator(tool, "output_schema")
    if validator is None:
        return
    for i, example in enumerate(tool.examples):
        if example.has_result and not validator.is_valid(example.result):
            message, path = next(iter_instance_errors(schema, example.result), ("it is not valid", []))
            yield _at(tool, example, "result", path, f"examples[{i}] result does not match 'output_schema': {message}")


def _at(tool: ToolSpec, example: Example, part: str, path: list[str | int], message: str) -> Diagnostic:
    pointer = f"{example.pointer}/{part}{json_pointer(path)}"
    return RULE.diag(tool, pointer, message, key=not path)


RULE = Rule(code="TF210", name="invalid-example", severity=Severity.ERROR, doc=__doc__ or "", check=check)
