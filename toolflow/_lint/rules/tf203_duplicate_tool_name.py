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

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule, duplicate_declarations
from toolflow._lint._summary import ProjectSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    declared = {name: [tool.place for tool in tools] for name, tools in summary.tools_by_name.items()}
    for name, place, others in duplicate_declarations(declared):
        yield RULE.diag_at(place, f"tool {name!r} is also declared at {others}")


RULE = Rule(code="TF203", name="duplicate-tool-name", severity=Severity.ERROR, doc=__doc__ or "", check_project=check)
