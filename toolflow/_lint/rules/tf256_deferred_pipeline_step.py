"""A pipeline step calls a deferred tool, which a step runs in the foreground.

## What it does
Reports each pipeline step whose tool is `deferred` (its own `deferred: true`, or its
category's in `policy.categories`).

## Why is this bad?
The agent loop leaves a deferred tool's calls to the application: the run ends `deferred`
and waits for their results. A pipeline's steps are not the model's calls: they run in the
foreground, through the engine, like `toolflow call` runs a tool. The step runs the tool's
implementation, which is most likely not what the author of a deferred tool meant (a
person's answer, a job elsewhere).

## Example
```yaml
tools:
  ask_human:
    description: Ask the player; the game answers later
    deferred: true
    implementation: ask_human
  plan_route:
    description: Ask which way, then look there
    pipeline:
      steps:
        answer:
          tool: ask_human
          with: {question: "Which way?"}
```

## Use instead
```yaml
tools:
  ask_human:
    description: Ask the player; the game answers later
    deferred: true
    implementation: ask_human
  look_there:
    description: Look the way the player chose
    implementation: look_there
```
Let the model call `ask_human` itself, and the next tool with the answer.
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import CategoryFacts, ProjectSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    categories = summary.categories
    for step, target in summary.step_targets():
        if target.deferred is not None:
            why = "is deferred"
        elif categories.get(target.category, CategoryFacts()).deferred:
            why = f"is in category {target.category!r}, which is deferred"
        else:
            continue
        message = (
            f"step {step.name!r} calls {target.name!r}, which {why}: a pipeline's steps run in the "
            "foreground, so the step runs its implementation and nobody is waited for"
        )
        yield RULE.diag_at(step.tool_place, message)


RULE = Rule(
    code="TF256",
    name="deferred-pipeline-step",
    severity=Severity.WARNING,
    doc=__doc__ or "",
    check_project=check,
)
