"""A tool name that model providers reject.

## What it does
Reports tool names that do not match `^[a-zA-Z0-9_-]{1,64}$`, the rule OpenAI and
Anthropic apply to function and tool names, with a legal name to use instead
(`web.search` becomes `web_search`: each run of other characters is replaced
by `_`, and the name is cut at 64 characters).

## Why is this bad?
The provider rejects the whole request that lists the tool, so no tool of the
agent can be called.

## Example
```yaml
tools:
  search objects:
    description: Search objects
  web.search:
    description: Search the web
```

## Use instead
```yaml
tools:
  search_objects:
    description: Search objects
  web_search:
    description: Search the web
```
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule

PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def legal_name(name: str) -> str:
    """*name* made legal: each run of other characters becomes ``_``, cut at 64 characters."""
    return re.sub(r"[^a-zA-Z0-9_-]+", "_", name).strip("_")[:64].rstrip("_")


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        if not PROVIDER_NAME.match(tool.name):
            reason = (
                "is longer than 64 characters"
                if len(tool.name) > 64
                else "has characters other than a-z, A-Z, 0-9, '_' and '-'"
            )
            if not tool.name:
                reason = "is empty"
            suggestion = legal_name(tool.name)
            if suggestion:
                taken = " (another tool has that name already)" if suggestion in ctx.tools_by_name else ""
                reason += f"; rename it, e.g. to {suggestion!r}{taken}"
            yield RULE.diag(tool, tool.pointer, f"tool name {tool.name!r} {reason}", key=True)


RULE = Rule(code="TF201", name="invalid-tool-name", severity=Severity.ERROR, doc=__doc__ or "", check=check)
