"""Pipelines that call themselves through their steps, directly or through other pipelines.

## What it does
Follows the steps of every pipeline across the linted files and reports each
step whose tool is a pipeline on a cycle back to the step's own pipeline, at
the step's `tool:`. The message shows the cycle: `a -> b -> a`.

## Why is this bad?
A pipeline on such a cycle would call itself without end, each call one level
deeper, until the timeout or a limit stops it. The registry refuses to build
with such pipelines.

## Example
```yaml
tools:
  tidy_room:
    description: Tidy the room, then check it
    pipeline:
      steps:
        check:
          tool: check_room
  check_room:
    description: Check the room, tidying it again
    pipeline:
      steps:
        tidy:
          tool: tidy_room
```

## Use instead
```yaml
tools:
  tidy_room:
    description: Tidy the room, then check it
    pipeline:
      steps:
        sweep:
          tool: sweep_floor
        check:
          tool: check_room
  check_room:
    description: Check the room
    implementation: check_room
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._graphs import chain, components, shortest_path
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    pipelines = [tool for tool in summary.tools if tool.pipeline is not None]
    if not pipelines:
        return
    callers = {tool.name for tool in pipelines}
    graph: dict[str, list[str]] = {}
    for tool in pipelines:
        assert tool.pipeline is not None
        targets = graph.setdefault(tool.name, [])
        for step in tool.pipeline.steps:
            if step.tool in callers and step.tool not in targets:
                targets.append(step.tool)
    component = components(graph)
    paths: dict[tuple[str, str], list[str]] = {}
    for tool in pipelines:
        assert tool.pipeline is not None
        for step in tool.pipeline.steps:
            if step.tool not in graph or component[step.tool] != component[tool.name]:
                continue
            key = (step.tool, tool.name)
            if key not in paths:
                paths[key] = shortest_path(graph, component, step.tool, tool.name)
            shown = chain([tool.name, *paths[key]])
            if step.tool == tool.name:
                message = f"pipeline cycle {shown}: step {step.name!r} calls its own pipeline, which never ends"
            else:
                message = f"pipeline cycle {shown}: step {step.name!r} leads back to {tool.name!r}, which never ends"
            yield RULE.diag_at(step.tool_place, message)


RULE = Rule(code="TF229", name="pipeline-cycle", severity=Severity.ERROR, doc=__doc__ or "", check_project=check)
