"""A `dangerous` tool whose results are cached.

## What it does
Reports a tool of category `dangerous` that has a `cache`, its own or one it
takes from the file's `defaults`. The diagnostic points at the `cache` that
applies.

## Why is this bad?
A dangerous tool is called for its effect. With a cache, a second call with the
same arguments returns the first call's result without acting again: the model
believes the door was locked a second time, or the message sent twice, when
nothing happened.

## Example
```yaml
defaults:
  cache: {scope: session}
tools:
  send_message:
    description: Send a message
    category: dangerous
    implementation: send_message
```

## Use instead
```yaml
defaults:
  cache: {scope: session}
tools:
  send_message:
    description: Send a message
    category: dangerous
    implementation: send_message
    cache: false
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._model import Category


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for spec_file in ctx.files:
        data = spec_file.data if isinstance(spec_file.data, dict) else {}
        bodies = data.get("tools")
        if not isinstance(bodies, dict):
            bodies = {}
        defaults = data.get("defaults")
        default = defaults.get("cache") if isinstance(defaults, dict) else None
        for tool in spec_file.tools:
            if tool.category != Category.DANGEROUS or tool.cache is None:
                continue
            body = bodies.get(tool.name)
            own = body.get("cache") if isinstance(body, dict) else None
            if default is not None and own is None:
                message = (
                    f"the file's default 'cache' applies to dangerous tool {tool.name!r}: "
                    "a repeated call would not act again"
                )
                yield RULE.diag(tool, "/defaults/cache", message, key=True)
            else:
                message = f"dangerous tool {tool.name!r} is cached: a repeated call would not act again"
                yield RULE.diag(tool, f"{tool.pointer}/cache", message, key=True)


RULE = Rule(code="TF220", name="dangerous-cached", severity=Severity.ERROR, doc=__doc__ or "", check=check)
