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

from collections import deque
from collections.abc import Iterator, Mapping, Sequence

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary

_LONGEST_CHAIN = 12
"""Cycles of more tools than this are shortened in messages."""


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    graph: dict[str, list[str]] = {}
    for tool in summary.tools:
        targets = graph.setdefault(tool.name, [])
        for dependency in tool.depends_on:
            if dependency.tool in summary.tools_by_name and dependency.tool not in targets:
                targets.append(dependency.tool)
    if not any(graph.values()):
        return
    component = _components(graph)
    paths: dict[tuple[str, str], list[str]] = {}
    for tool in summary.tools:
        for dependency in tool.depends_on:
            target = dependency.tool
            if target not in graph or component[target] != component[tool.name]:
                continue
            key = (target, tool.name)
            if key not in paths:
                paths[key] = _shortest_path(graph, component, target, tool.name)
            chain = _chain([tool.name, *paths[key]])
            if target == tool.name:
                message = f"dependency cycle {chain}: tool {tool.name!r} waits for itself, so it can never run"
            else:
                message = f"dependency cycle {chain}: each tool waits for the next, so none of them can ever run"
            yield RULE.diag_at(dependency.place, message)


def _chain(names: list[str]) -> str:
    """``a -> b -> a``; a long cycle shows its first tools and its length."""
    if len(names) <= _LONGEST_CHAIN:
        return " -> ".join(names)
    shown = [*names[: _LONGEST_CHAIN - 2], "...", names[-1]]
    return f"{' -> '.join(shown)} ({len(names) - 1} tools)"


def _components(graph: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """Number the strongly connected components of *graph* (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    component: dict[str, int] = {}
    number = 0
    for root in graph:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, 0)]
        while work:
            node, i = work[-1]
            successors = graph[node]
            if i < len(successors):
                work[-1] = (node, i + 1)
                successor = successors[i]
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, 0))
                elif successor in on_stack:
                    low[node] = min(low[node], index[successor])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                number += 1
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component[member] = number
                    if member == node:
                        break
    return component


def _shortest_path(graph: Mapping[str, Sequence[str]], component: Mapping[str, int], start: str, end: str) -> list[str]:
    """The shortest path from *start* to *end* inside their component, both included."""
    if start == end:
        return [start]
    previous: dict[str, str] = {start: start}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for successor in graph[node]:
            if successor in previous or component[successor] != component[start]:
                continue
            previous[successor] = node
            if successor == end:
                path = [end]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return path[::-1]
            queue.append(successor)
    return [start, end]  # unreachable: both are in one component


RULE = Rule(code="TF214", name="tool-dependency-cycle", severity=Severity.ERROR, doc=__doc__ or "", check_project=check)
