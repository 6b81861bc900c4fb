"""A tool category that is neither built in nor declared by a policy.

## What it does
Reports a `category` that is not one of the built-in categories (`safe_chain`,
`terminal`, `dangerous`, `async_required`) and that no linted file declares as
a key of its `policy: categories:` mapping.

## Why is this bad?
The category decides what the agent loop does after a call: chain on, stop,
allow at most one per tick, or wait. A category the loop does not know is
usually a typo, and the tool would not get the handling its author meant.

## Example
```yaml
tools:
  delete_file:
    description: Delete a file
    category: dangerus
    implementation: delete_file
```

## Use instead
```yaml
tools:
  delete_file:
    description: Delete a file
    category: dangerous
    implementation: delete_file
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary
from toolflow._model import BUILTIN_CATEGORIES
from toolflow._schemas import did_you_mean


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    known: set[str] | None = None
    for tool in summary.tools:
        if tool.category in BUILTIN_CATEGORIES:
            continue
        if known is None:
            known = set(BUILTIN_CATEGORIES) | summary.declared_categories
        if tool.category not in known:
            message = (
                f"unknown category {tool.category!r}: it is not built in and no 'policy.categories' declares it"
                f"{did_you_mean(tool.category, sorted(known))}"
            )
            if tool.category_place is not None:  # always, for a category that is not built in
                yield RULE.diag_at(tool.category_place, message)


RULE = Rule(code="TF221", name="unknown-category", severity=Severity.ERROR, doc=__doc__ or "", check_project=check)
