"""A `context:` entry that names no parameter of the tool, or whose path is malformed.

## What it does
Reports each key of a tool's `context:` that is not a property of its `parameters`
(with the closest one), and each path that is not dot-separated keys
(`user.id`, `channel.members.0`: letters, digits, `_` and `-`, no empty key).

## Why is this bad?
A parameter bound to the context is removed from what the model is shown and
filled from the caller's context. A binding for a parameter the tool does not
have fills nothing (the value never reaches the tool, or, with
`additionalProperties: false`, every call is refused); a malformed path finds
no value in any context.

## Example
```yaml
tools:
  my_orders:
    description: The user's orders
    implementation: my_orders
    context: {userid: user..id}
    parameters:
      type: object
      properties:
        user_id: {type: string, description: Whose orders}
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
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._model import CONTEXT_PATH
from toolflow._schemas import did_you_mean


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        if not tool.context:
            continue
        properties = tool.parameters.get("properties") if isinstance(tool.parameters, Mapping) else None
        for name, path in tool.context.items():
            pointer = f"{tool.pointer}/context/{_escape(name)}"
            if isinstance(properties, Mapping) and name not in properties:
                known = sorted(str(n) for n in properties)
                message = (
                    f"context binds {name!r}, which is not a parameter of tool {tool.name!r}{did_you_mean(name, known)}"
                    if known
                    else f"context binds {name!r}, but tool {tool.name!r} declares no parameters"
                )
                yield RULE.diag(tool, pointer, message, key=True)
            elif properties is None:
                yield RULE.diag(
                    tool, pointer, f"context binds {name!r}, but tool {tool.name!r} declares no parameters", key=True
                )
            if isinstance(path, str) and CONTEXT_PATH.fullmatch(path) is None:
                message = (
                    f"context path {path!r} of parameter {name!r} is malformed: "
                    "write dot-separated keys of letters, digits, '_' and '-' (e.g. 'user.id')"
                )
                yield RULE.diag(tool, pointer, message)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


RULE = Rule(code="TF254", name="invalid-context-binding", severity=Severity.ERROR, doc=__doc__ or "", check=check)
