"""A tool dependency on a tool that no spec file declares.

## What it does
Reports `depends_on` entries naming a tool that is not declared in any of the
linted files.

## Why is this bad?
A tool may run only after each tool it depends on has succeeded. A dependency
that can never succeed, because no such tool exists, means the tool can never
run at all; the name is usually a typo or a tool that was renamed.

## Example
```yaml
tools:
  search_objects:
    description: Search objects
    implementation: search
  open_object:
    description: Open an object found by a search
    implementation: open
    depends_on: [search_object]
```

## Use instead
```yaml
tools:
  search_objects:
    description: Search objects
    implementation: search
  open_object:
    description: Open an object found by a search
    implementation: open
    depends_on: [search_objects]
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary
from toolflow._schemas import did_you_mean


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    known = summary.tools_by_name
    names: list[str] | None = None
    for tool in summary.tools:
        for dependency in tool.depends_on:
            if dependency.tool in known:
                continue
            if names is None:
                names = sorted(known)
            others = [name for name in names if name != tool.name]
            message = (
                f"tool {tool.name!r} depends on {dependency.tool!r}, which no spec file declares"
                f"{did_you_mean(dependency.tool, others)}"
            )
            yield RULE.diag_at(dependency.place, message)


RULE = Rule(
    code="TF213", name="unknown-tool-dependency", severity=Severity.ERROR, doc=__doc__ or "", check_project=check
)
