"""A tool dependency on a tool that no spec file declares.

## What it does
Reports `depends_on` entries naming a tool that is not declared in any of the
linted files.

A tool that an MCP server's `tools:` lists (with the server's `prefix`) is
declared; a name that may be a tool of a server importing all its tools is
reported by TF244 instead, as a warning. The `depends_on` of a server's
`overrides` are checked too.

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
    dependencies = [(tool.name, dependency) for tool in summary.tools for dependency in tool.depends_on]
    dependencies.extend(summary.server_dependencies)  # of remote tools, from their overrides
    for name, dependency in dependencies:
        if summary.may_exist(dependency.tool):  # a name that may be remote is TF244's
            continue
        others = [other for other in summary.declared_names if other != name]
        message = (
            f"tool {name!r} depends on {dependency.tool!r}, which no spec file declares"
            f"{did_you_mean(dependency.tool, others)}"
        )
        yield RULE.diag_at(dependency.place, message)


RULE = Rule(
    code="TF213", name="unknown-tool-dependency", severity=Severity.ERROR, doc=__doc__ or "", check_project=check
)
