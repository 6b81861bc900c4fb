"""Trigger phrases for a tool that deliberate mode does not expose.

## What it does
Reports, as a warning, a key of a policy's `deliberate.triggers` that its
`deliberate.tools` list does not name, at the key.

## Why is this bad?
Deliberate mode exposes only the tools of `deliberate.tools`; a trigger
phrase decides when one of *those* is shown. Triggers for any other tool
never expose it: a user saying the phrase gets a model that still cannot call
the tool. The tool was usually left out of `tools` by mistake, or the key is
misspelt.

## Example
```yaml
tools:
  execute_command:
    description: Run a game command
  inspect_location:
    description: Look around
policy:
  deliberate:
    tools: [inspect_location]
    triggers:
      execute_command: [run the command]
```

## Use instead
```yaml
tools:
  execute_command:
    description: Run a game command
  inspect_location:
    description: Look around
policy:
  deliberate:
    tools: [inspect_location, execute_command]
    triggers:
      execute_command: [run the command]
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    for spec_file in summary.files:
        policy = spec_file.policy
        if policy is None or not policy.triggers:
            continue
        tools = {entry.name for entry in dict(policy.lists).get("deliberate", ())}
        for entry in policy.triggers:
            if entry.name not in tools and summary.may_exist(entry.name):  # else TF224's
                message = (
                    f"'deliberate' has triggers for {entry.name!r}, which its 'tools' do not list: deliberate mode "
                    "never exposes it, whatever the user says; add it to 'tools'"
                )
                yield RULE.diag_at(entry.place, message)


RULE = Rule(
    code="TF251", name="trigger-outside-deliberate", severity=Severity.WARNING, doc=__doc__ or "", check_project=check
)
