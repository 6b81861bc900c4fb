"""The same tool name is declared in more than one file.

## What it does
Reports every declaration of a tool name that another spec file declares too,
naming the other places as `path:line:col`. (The same name twice in one file
is a duplicate key, TF002.)

## Why is this bad?
Tool names are the keys models call tools by, and the registry holds one tool
per name: one of the declarations would silently win, and which one would
depend on the order the files are loaded in.

## Example
```yaml
# specs/search.yaml
tools:
  search:
    description: Search the web
# specs/library.yaml
tools:
  search:
    description: Search the library catalogue
```

## Use instead
```yaml
# specs/search.yaml
tools:
  search_web:
    description: Search the web
# specs/library.yaml
tools:
  search_catalogue:
    description: Search the library catalogue
```
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._model import ToolSpec


def _where(tool: ToolSpec) -> str:
    if tool.locator is None:
        return tool.file
    span = tool.locator.locate(tool.pointer, key=True)
    return f"{tool.file}:{span.line}:{span.column}"


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for name, tools in ctx.tools_by_name.items():
        if len(tools) < 2:
            continue
        # The same file named twice on the command line is not a duplicate declaration.
        real = [os.path.realpath(t.file) for t in tools]
        if len(set(real)) < 2:
            continue
        for tool, path in zip(tools, real, strict=True):
            others = dict.fromkeys(_where(t) for t, p in zip(tools, real, strict=True) if p != path)
            if others:
                where = ", ".join(others)
                yield RULE.diag(tool, tool.pointer, f"tool {name!r} is also declared at {where}", key=True)


RULE = Rule(code="TF203", name="duplicate-tool-name", severity=Severity.ERROR, doc=__doc__ or "", check=check)
