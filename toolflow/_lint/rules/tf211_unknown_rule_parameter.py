"""A parameter rule that names a parameter the tool does not have.

## What it does
Reports names in `parameter_rules` (the `when` parameter or the keys of a `when`
mapping, and the items of `require`, `exclusive`, `at_least_one` and
`exactly_one`) that are not properties of the tool's `parameters`.

## Why is this bad?
A rule about a parameter that does not exist is almost always a typo. It is
silently wrong rather than loudly wrong: `require: [qurey]` makes every call that
triggers the rule fail validation, and `exclusive: [qurey, id]` checks nothing.

## Example
```yaml
tools:
  search:
    parameters:
      type: object
      properties:
        query: {type: string, description: Words to look for}
        id: {type: string, description: Exact object id}
    parameter_rules:
      - exclusive: [qurey, id]
```

## Use instead
```yaml
tools:
  search:
    parameters:
      type: object
      properties:
        query: {type: string, description: Words to look for}
        id: {type: string, description: Exact object id}
    parameter_rules:
      - exclusive: [query, id]
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._model import ToolSpec
from toolflow._schemas import did_you_mean


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        if not tool.parameter_rules:
            continue
        properties = tool.parameters.get("properties", {}) if isinstance(tool.parameters, Mapping) else None
        if not isinstance(properties, Mapping):
            continue  # not a schema this rule can read; TF204 reports it
        known = sorted(str(name) for name in properties)
        for rule in tool.parameter_rules:
            if rule.when is not None and rule.when not in properties:
                yield _unknown(tool, f"{rule.pointer}/when", "when", rule.when, known)
            for name in rule.when_values or ():
                if name not in properties:
                    yield _unknown(tool, f"{rule.pointer}/when/{_escape(name)}", "when", name, known, key=True)
            form = "require" if rule.kind == "requires" else rule.kind
            for i, name in enumerate(rule.params):
                if name not in properties:
                    yield _unknown(tool, f"{rule.pointer}/{form}/{i}", form, name, known)


def _unknown(tool: ToolSpec, pointer: str, form: str, name: str, known: list[str], *, key: bool = False) -> Diagnostic:
    if known:
        hint = did_you_mean(name, known)
        message = f"parameter rule names {name!r} in {form!r}, which is not a parameter of tool {tool.name!r}{hint}"
    else:
        message = f"parameter rule names {name!r} in {form!r}, but tool {tool.name!r} declares no parameters"
    return RULE.diag(tool, pointer, message, key=key)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


RULE = Rule(code="TF211", name="unknown-rule-parameter", severity=Severity.ERROR, doc=__doc__ or "", check=check)
