"""A command with nothing to run.

## What it does
Reports a `command:` whose argv is empty, and one whose program (the first
item) is empty or only whitespace.

## Why is this bad?
There is no program to start, so every call of the tool fails. Commands are
never run through a shell, so an empty program cannot mean anything else.

## Example
```yaml
tools:
  disk_usage:
    description: Show disk usage
    command: ["", "-h"]
```

## Use instead
```yaml
tools:
  disk_usage:
    description: Show disk usage
    command: [df, "-h"]
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._model import ToolSpec
from toolflow._yaml import NodeLocator


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        for impl in tool.implementations:
            if impl.kind != "command" or not isinstance(impl.config, dict):
                continue
            argv = impl.config.get("argv")
            if not isinstance(argv, list):
                continue
            pointer = f"{impl.pointer}/argv" if _is_mapping(tool, impl.pointer) else impl.pointer
            if not argv:
                yield RULE.diag(tool, pointer, f"the command of tool {tool.name!r} is empty: argv names no program")
            elif isinstance(argv[0], str) and not argv[0].strip():
                yield RULE.diag(tool, f"{pointer}/0", f"the command of tool {tool.name!r} has an empty program")


def _is_mapping(tool: ToolSpec, pointer: str) -> bool:
    if not isinstance(tool.locator, NodeLocator):
        return False
    return tool.locator.kind(pointer) == "mapping"


RULE = Rule(code="TF217", name="empty-command", severity=Severity.ERROR, doc=__doc__ or "", check=check)
