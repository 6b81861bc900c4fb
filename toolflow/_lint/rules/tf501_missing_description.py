"""A tool without a description, or with a blank one.

## What it does
Reports tools that have no `description` (at the tool's name) or whose
`description` is empty or only whitespace (at the description).

## Why is this bad?
The description is how the model decides when to call the tool. Without one it
has only the name to go by, so it calls the tool at the wrong time or never.
Seed 003 makes a non-empty description a requirement of every tool definition,
and providers send it to the model as the tool's documentation.

## Example
```yaml
tools:
  recall_memories:
    parameters:
      type: object
      properties:
        topic:
          type: string
          description: What to remember
```

## Use instead
```yaml
tools:
  recall_memories:
    description: Recall what the assistant has stored about a topic
    parameters:
      type: object
      properties:
        topic:
          type: string
          description: What to remember
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._lint._target_facts import declares


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for spec_file in ctx.files:
        for tool in spec_file.tools:
            if isinstance(tool.description, str) and tool.description.strip():
                continue
            if declares(spec_file, tool, "description"):
                message = f"tool {tool.name!r} has a blank description; say what the tool does and when to call it"
                yield RULE.diag(tool, f"{tool.pointer}/description", message, key=True)
            else:
                message = f"tool {tool.name!r} has no description; say what the tool does and when to call it"
                yield RULE.diag(tool, tool.pointer, message, key=True)


RULE = Rule(code="TF501", name="missing-description", severity=Severity.ERROR, doc=__doc__ or "", check=check)
