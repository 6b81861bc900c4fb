"""A tool name that is not a plain identifier, or that starts with an underscore.

## What it does
Reports tool names that the providers accept but that are not valid Python
identifiers (they contain `-`, start with a digit, or are a Python keyword),
and names that start with `_`, which is reserved for internal names. Names
that providers reject outright are TF201's.

## Why is this bad?
Implementations, templates and generated client code refer to tools by name as
identifiers: `search-objects` cannot be a function, a method or a keyword
argument without being renamed, and every renaming is a place to get it wrong.
Models also copy names more reliably when they look like ordinary identifiers.

## Example
```yaml
tools:
  search-objects:
    description: Search objects
  _reindex:
    description: Rebuild the search index
```

## Use instead
```yaml
tools:
  search_objects:
    description: Search objects
  reindex:
    description: Rebuild the search index
```
"""

from __future__ import annotations

import keyword
from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._lint.rules.tf201_invalid_tool_name import PROVIDER_NAME


def _problem(name: str) -> str | None:
    if name.startswith("_"):
        return "starts with '_', which is reserved for internal names"
    if not name.isidentifier():
        if name[0].isdigit():
            return "is not a valid identifier: it starts with a digit"
        return "is not a valid identifier: it contains '-'; use '_' instead"
    if keyword.iskeyword(name):
        return "is a Python keyword"
    return None


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        if not PROVIDER_NAME.match(tool.name):
            continue
        if (reason := _problem(tool.name)) is not None:
            yield RULE.diag(tool, tool.pointer, f"tool name {tool.name!r} {reason}", key=True)


RULE = Rule(code="TF202", name="non-identifier-tool-name", severity=Severity.WARNING, doc=__doc__ or "", check=check)
