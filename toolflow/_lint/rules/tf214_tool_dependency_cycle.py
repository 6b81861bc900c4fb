"""Tools that depend on each other in a cycle, or a tool that depends on itself.

## What it does
Follows `depends_on` across every linted file and reports each dependency that
lies on a cycle, at that `depends_on` entry of every tool on the cycle. The
message shows the cycle from the reporting tool: `a -> b -> a`.

## Why is this bad?
A tool may run only after the tools it depends on have succeeded. On a cycle,
each tool waits for the next one, so none of them can ever run first.

## Example
```yaml
tools:
  open_door:
    description: Open a door
    implementation: open_door
    depends_on: [unlock_door]
  unlock_door:
    description: Unlock a door
    implementation: unlock_door
    depends_on: [open_door]
```

## Use instead
```yaml
tools:
  open_door:
    description: Open a door
    implementation: open_door
    depends_on: [unlock_door]
  unlock_door:
    description: Unlock a door
    implementation: unlock_door
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._graphs import chain, components, shortest_path
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    graph: dict[str, list[str]] = {}
    for tool in summary.tools:
        targets = graph.setdefault(tool.name, [])
        for dependency in tool.depends_on:
            if dependency.tool in summary.tools_by_name and dependency.tool not in targets:
                targets.append(dependency.tool)
    if not any(graph.values()):
        return
    component = components(graph)
    paths: dict[tuple[str, str], list[str]] = {}
    for tool in summary.tools:
        for dependency in tool.depends_on:
            target = dependency.tool
            if target not in graph or component[target] != component[tool.name]:
                continue
            key = (target, tool.name)
            if key not in paths:
                paths[key] = shortest_path(graph, component, target, tool.name)
            shown = chain([tool.name, *paths[key]])
            if target == tool.name:
                message = f"dependency cycle {shown}: tool {tool.name!r} waits for itself, so it can never run"
            else:
                message = f"dependency cycle {shown}: each tool waits for the next, so none of them can ever run"
            yield RULE.diag_at(dependency.place, message)


RULE = Rule(code="TF214", name="tool-dependency-cycle", severity=Severity.ERROR, doc=__doc__ or "", check_project=check)
