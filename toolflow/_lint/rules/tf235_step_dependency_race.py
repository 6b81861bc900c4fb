"""A pipeline step whose tool depends on another step's tool, with nothing to order the two.

## What it does
Reports a step whose tool has a `depends_on` entry naming the tool of another
step of the same pipeline when the step does not wait for any step calling that
tool: neither directly nor through the steps it waits for does it read it
(`steps.NAME`, `errors.NAME`) or list it in `needs:`.

## Why is this bad?
Steps that do not wait for each other run concurrently, in either order. A
step succeeding counts as a call of its tool for `depends_on`, so the dependent
step passes its gate only when the other one happened to finish first: a race
that fails some calls of the pipeline and not others.

## Example
```yaml
tools:
  unlock_door:
    description: Unlock the door
    implementation: unlock_door
  open_door:
    description: Open the door
    implementation: open_door
    depends_on: [unlock_door]
  enter_room:
    description: Unlock and open the door
    pipeline:
      steps:
        unlock:
          tool: unlock_door
        open:
          tool: open_door
```

## Use instead
```yaml
tools:
  unlock_door:
    description: Unlock the door
    implementation: unlock_door
  open_door:
    description: Open the door
    implementation: open_door
    depends_on: [unlock_door]
  enter_room:
    description: Unlock and open the door
    pipeline:
      steps:
        unlock:
          tool: unlock_door
        open:
          tool: open_door
          needs: [unlock]
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import PipelineSummary, ProjectSummary, StepSummary, ToolSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    for tool in summary.tools:
        if tool.pipeline is not None and len(tool.pipeline.steps) > 1:
            yield from _pipeline(summary, tool.name, tool.pipeline)


def _pipeline(summary: ProjectSummary, name: str, pipeline: PipelineSummary) -> Iterator[Diagnostic]:
    before = _transitive(pipeline)
    callers: dict[str, list[StepSummary]] = {}
    for step in pipeline.steps:
        callers.setdefault(step.tool, []).append(step)
    for step in pipeline.steps:
        called = summary.tools_by_name.get(step.tool, ())
        if len(called) != 1:
            continue
        for dependency in _dependencies(called[0]):
            others = [other for other in callers.get(dependency, ()) if other is not step]
            if not others or any(other.name in before[step.name] for other in others):
                continue
            other = others[0]
            later = pipeline.steps.index(other) > pipeline.steps.index(step)
            fix = (
                f"move {other.name!r} before it and list it in its 'needs'"
                if later
                else f"add {other.name!r} to its 'needs'"
            )
            message = (
                f"step {step.name!r} of pipeline {name!r} calls {step.tool!r}, which depends on {dependency!r}, "
                f"but does not wait for step {other.name!r} that calls it: they may run in either order; {fix}"
            )
            yield RULE.diag_at(step.tool_place, message)


def _dependencies(tool: ToolSummary) -> list[str]:
    return list(dict.fromkeys(d.tool for d in tool.depends_on if d.tool != tool.name))


def _transitive(pipeline: PipelineSummary) -> dict[str, set[str]]:
    """Each step's name to every step it waits for, directly or not (steps wait only for earlier ones)."""
    before: dict[str, set[str]] = {}
    for step in pipeline.steps:
        found: set[str] = set()
        for name in step.waits_for:
            found.add(name)
            found |= before.get(name, set())
        before[step.name] = found
    return before


RULE = Rule(code="TF235", name="step-dependency-race", severity=Severity.ERROR, doc=__doc__ or "", check_project=check)
