"""A deferred category or tool also asks for something the agent loop never does to a deferred call.

## What it does
Reports a `policy.categories` entry with `deferred: true` that also sets `approval: true`,
and a tool with `deferred: true` that has an `approval:` of its own. (A category both
`deferred` and `background` is an error of its own: TF258.)

## Why is this bad?
The agent loop does not run a deferred call: it waits for the application's result. So it
never asks anybody to approve it (the
application that answers the call decides whether to carry it out). The setting reads as a
safeguard, or a way of running, that the loop does not apply; outside the loop (`toolflow
call`, `toolflow serve`, pipeline steps) the tool runs as usual, approval and all.

## Example
```yaml
policy:
  categories:
    review: {deferred: true, approval: true}
```

## Use instead
```yaml
policy:
  categories:
    review: {deferred: true}
```
and approve the call where the application answers it.
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    for spec_file in summary.files:
        for settings in spec_file.policy.settings if spec_file.policy is not None else ():
            if not settings.deferred or settings.place is None:
                continue
            if settings.approval:
                message = (
                    f"category {settings.name!r} is deferred and sets approval: true, which the agent loop "
                    "never applies to a call it leaves to the application"
                )
                yield RULE.diag_at(settings.place, message)
    for tool in summary.tools:
        if tool.deferred is not None and tool.approval is not None:
            message = (
                f"tool {tool.name!r} is deferred and has an approval of its own, which the agent loop never "
                "asks for a call it leaves to the application"
            )
            yield RULE.diag_at(tool.approval, message)


RULE = Rule(
    code="TF257",
    name="deferred-setting-never-applies",
    severity=Severity.WARNING,
    doc=__doc__ or "",
    check_project=check,
)
