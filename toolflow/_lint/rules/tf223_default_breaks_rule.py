"""A parameter's `default` turns one of the tool's parameter rules against its callers.

## What it does
Reports the `default` of a top-level parameter that takes part in a parameter
rule whose meaning the default changes. Defaults are filled in before the
rules are checked, so a parameter with a default is always given:

- in an `exclusive` or `exactly_one` rule, every call that gives one of the
  rule's other parameters fails;
- as the `when` parameter of a `require` rule, the rule applies to every
  call; with `when` values, to every call that leaves the parameters out,
  when each default is the value the rule waits for.

## Why is this bad?
The model is told the parameters are alternatives, or that some are needed
only when another is given, and it cannot see why its calls are rejected: it
never sent the parameter that the error names. The tool works only for calls
that the rule was meant to allow as one case among several.

## Example
```yaml
tools:
  search:
    parameters:
      type: object
      properties:
        limit:
          type: integer
          default: 10
          description: Most results to return
        room:
          type: string
          description: Only objects in this room
    parameter_rules:
      - exclusive: [limit, room]
```

## Use instead
```yaml
tools:
  search:
    parameters:
      type: object
      properties:
        limit:
          type: integer
          description: Most results to return (10 when neither is given)
        room:
          type: string
          description: Only objects in this room
    parameter_rules:
      - exclusive: [limit, room]
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._model import ParameterRule, ToolSpec
from toolflow._schemas import json_pointer


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        if not tool.parameter_rules or not isinstance(tool.parameters, Mapping):
            continue
        defaults = _defaults(tool.parameters)
        if not defaults:
            continue
        for rule in tool.parameter_rules:
            yield from _check_rule(tool, rule, defaults)


def _defaults(parameters: Mapping[str, object]) -> dict[str, object]:
    """The defaults the argument validator fills in: those of the top-level properties."""
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    return {
        name: schema["default"]
        for name, schema in properties.items()
        if isinstance(name, str) and isinstance(schema, Mapping) and "default" in schema
    }


def _where(rule: ParameterRule) -> str:
    index = rule.pointer.rsplit("/", 1)[-1]
    return f"parameter_rules[{index}]" if index.isdigit() else "a parameter rule"


def _names(names: list[str]) -> str:
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _all(names: list[str]) -> str:
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"


def _check_rule(tool: ToolSpec, rule: ParameterRule, defaults: Mapping[str, object]) -> Iterator[Diagnostic]:
    names = list(dict.fromkeys(rule.params))
    where = _where(rule)
    if rule.kind in ("exclusive", "exactly_one"):
        form = rule.kind
        for name in names:
            others = [n for n in names if n != name]
            if name in defaults and others:
                message = (
                    f"parameter {name!r} has a default, which is filled in before {where} ({form!r}) is checked: "
                    f"every call that gives {_names(others)} is rejected"
                )
                yield _at_default(tool, name, message)
    elif rule.kind == "requires":
        # A required parameter with a default of its own is always there: the rule cannot fail on it.
        needed = [n for n in names if n not in defaults]
        verb = "is" if len(needed) == 1 else "are"
        if not needed:
            return
        if rule.when is not None and rule.when in defaults:
            message = (
                f"parameter {rule.when!r} has a default, which is filled in before {where} is checked: "
                f"{_all(needed)} {verb} required in every call"
            )
            yield _at_default(tool, rule.when, message)
        elif rule.when_values:
            conditions = dict(rule.when_values)
            if all(n in defaults and _same_json(defaults[n], v) for n, v in conditions.items()):
                for name in conditions:
                    message = (
                        f"parameter {name!r} has default {defaults[name]!r}, the value {where} waits for, "
                        f"and defaults are filled in before it is checked: {_all(needed)} {verb} required "
                        f"in every call that leaves out {_all(list(conditions))}"
                    )
                    yield _at_default(tool, name, message)


def _at_default(tool: ToolSpec, name: str, message: str) -> Diagnostic:
    return RULE.diag(tool, f"{tool.pointer}/parameters{json_pointer(['properties', name, 'default'])}", message)


def _same_json(a: object, b: object) -> bool:
    """Equality as JSON Schema's ``const`` sees it: ``1 == 1.0``, but ``true != 1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


RULE = Rule(code="TF223", name="default-breaks-rule", severity=Severity.WARNING, doc=__doc__ or "", check=check)
